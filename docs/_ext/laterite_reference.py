"""Sphinx directives that render laterite_django's reference from the code itself."""

from __future__ import annotations

import logging
from typing import Any

from sphinx.application import Sphinx


class _SectionWithoutPagesYet(logging.Filter):
    """Drop Sphinx's warning for a section's `:glob:` toctree that matches no page yet.

    Each section (tutorial/, howto/, ...) lists its pages by glob, so adding a page is
    adding a file; a section still empty is not a broken build. Sphinx gives that
    warning no type, so `suppress_warnings` cannot name it.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        return "toctree glob pattern" not in str(record.msg)


def setup(app: Sphinx) -> dict[str, Any]:
    """Register the reference directives."""
    logging.getLogger("sphinx.sphinx.directives.other").addFilter(_SectionWithoutPagesYet())
    return {"parallel_read_safe": True, "parallel_write_safe": True}
