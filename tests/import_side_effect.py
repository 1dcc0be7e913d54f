"""A module whose import writes a file (LATERITE_TEST_IMPORT_MARKER), standing in for
any module with import side effects: resolving a task path must never import it."""

import os
from pathlib import Path

_marker = os.environ.get("LATERITE_TEST_IMPORT_MARKER")
if _marker:
    Path(_marker).write_text("imported\n")


def task() -> None:
    """What a payload would name."""
