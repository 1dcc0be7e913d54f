"""What the docs tests share: the manual's folder and its reference extension's collectors
(docs/_ext/laterite_reference.py), imported as Sphinx imports them."""

from __future__ import annotations

import sys
from pathlib import Path
from types import ModuleType

from tests.conftest import ROOT

__all__ = ["DOCS", "PACKAGE", "extension"]

DOCS = ROOT / "docs"
PACKAGE = ROOT / "laterite_django"


def extension() -> ModuleType:
    """The reference extension module (docs/_ext is on Sphinx's path, not the suite's)."""
    path = str(DOCS / "_ext")
    if path not in sys.path:
        sys.path.insert(0, path)
    import laterite_reference

    return laterite_reference


def package_sources() -> dict[Path, str]:
    """Every Python file of the package, by path."""
    return {path: path.read_text() for path in sorted(PACKAGE.rglob("*.py"))}
