"""Sphinx configuration of laterite_django's manual (docs/).

Built by `nox -s docs` as `sphinx-build -W -n --keep-going -b html docs <out>`: every
warning fails the build, every cross-reference must resolve, and nothing is fetched
from the network (no intersphinx, no remote images). The reference pages are generated
from the code by the `laterite_reference` extension (docs/_ext/), so they cannot drift.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent

# autodoc imports the package, and the package imports Django's settings: those of
# docs/_ext/docs_settings.py (the package's app alone, on SQLite; nothing connects).
sys.path[:0] = [str(ROOT), str(DOCS / "_ext")]
os.environ["DJANGO_SETTINGS_MODULE"] = "docs_settings"

import django  # noqa: E402 -- after the path and the settings module are set

django.setup()

from laterite_django import __version__  # noqa: E402

project = "laterite_django"
author = "laterite_django developers"
copyright = "laterite_django developers"
version = release = __version__

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "laterite_reference",
]

source_suffix = {".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "Thumbs.db", ".DS_Store"]

myst_enable_extensions = ["colon_fence", "deflist"]
# Headings get anchors down to ###, so pages can link to a section: [x](page.md#section).
myst_heading_anchors = 3

html_theme = "furo"
html_title = f"laterite_django {release}"
html_static_path = ["_static"]
html_css_files = ["laterite.css"]
# Flags stay as typed: no "--processes" turned into an en dash, no curly 'quotes'.
smartquotes = False

# autodoc: the signature shows the names, the description the types. The package's
# docstrings are plain text with `code spans`, not reST: the extension reads them so.
autodoc_typehints = "description"
autodoc_typehints_description_target = "documented_params"
autodoc_member_order = "bysource"
autodoc_default_options = {"members": True, "no-value": True}

# `-n` (nitpicky): every reference must resolve, except these.
nitpick_ignore_regex = [
    # Types of Django, django-tasks and the standard library: no intersphinx (nothing is
    # fetched while building), so they have no page to link to.
    ("py:class", r"(django|django_tasks|collections\.abc|contextlib|typing)\..*"),
    ("py:class", r"Http(Request|Response)"),  # metrics.view's, imported for typing only
    # A job function's type variables: its arguments (P) and its return value (R).
    ("py:obj", r"laterite_django\.jobs\.[PR]"),
    # The model row BatchPlan.push returns (laterite_django.models, not documented here).
    ("py:class", r"Batch"),
    # Internals a public class builds on or a method meant for the package returns.
    ("py:class", r"(laterite_django\.)?(async_push\.AsyncPushes|push_checks\.PushChecks"
                 r"|(calls\.)?JobCall|(core\.values\.)?NewJob|(core\.rules\.)?JobOptions)"),
]
