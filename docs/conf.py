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
    "sphinx.ext.napoleon",
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

# autodoc: the signature shows the names, the description the types, so a type the
# manual does not document (a Django or typing internal) needs no entry of its own.
autodoc_typehints = "description"
autodoc_typehints_description_target = "documented_params"
autodoc_member_order = "bysource"
autodoc_default_options = {"members": True, "show-inheritance": False}
napoleon_google_docstring = True
napoleon_numpy_docstring = False

# `-n` (nitpicky): every reference must resolve. The few targets outside this manual,
# kept short; each names why it cannot resolve here.
nitpick_ignore: list[tuple[str, str]] = []
