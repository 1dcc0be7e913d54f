"""docs/architecture.md names only what exists: every path it cites is a file or folder of
the repository (most of them of the package, written from `laterite_django/`), and every
name it cites in a code span is in the package's code; a name written `module.name` is
in a module of that name."""

from __future__ import annotations

import importlib
import re
from functools import cache
from pathlib import Path

from tests.conftest import ROOT
from tests.docs.reference import DOCS, PACKAGE

PAGE = DOCS / "architecture.md"

FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.MULTILINE | re.DOTALL)
SPAN = re.compile(r"`([^`\n]+)`")
# A path in a code span: a file name with a folder or a known ending, or a folder.
PATH = re.compile(r"^[\w.*<>-]+(?:/[\w.*<>-]+)*(?:\.(?:py|lua|md|html|toml)|/)$")
# A path inside a drawing: a word with a slash, ending in a file name or a slash.
DRAWN_PATH = re.compile(r"(?<![\w/<>.-])((?:[\w*.-]+/)+(?:[\w*.-]+\.(?:py|lua))?)(?=[\s,]|$)")
# A name in a code span: `name`, `Class.name`, `module.name`, `call()`.
NAME = re.compile(r"^([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)(?:\(\))?$")


def _page() -> str:
    return PAGE.read_text()


def _spans(text: str) -> list[str]:
    """The code spans of the page's text outside its fenced blocks."""
    return SPAN.findall(FENCE.sub("", text))


def _resolves(path: str, *, anywhere: bool = False) -> bool:
    """Whether `path` (a glob allowed) names something from the repository's root or
    the package's folder; with `anywhere`, under any folder of the package (a drawing
    lists a folder's files under it)."""
    path = path.replace("<name>", "*").replace("<verb>", "*").replace("<piece>", "*")
    path = path.rstrip("/")
    for base in (ROOT, PACKAGE):
        if any(base.glob(path)):
            return True
    return anywhere and any(PACKAGE.glob(f"**/{path}"))


@cache
def _sources() -> dict[Path, str]:
    """The package's Python and Lua files, and the tests', by path."""
    files = [*PACKAGE.rglob("*.py"), *PACKAGE.rglob("*.lua"), *(ROOT / "tests").rglob("*.py")]
    return {path: path.read_text() for path in files}


def _has_word(word: str, texts: list[str]) -> bool:
    pattern = re.compile(rf"(?<![\w]){re.escape(word)}(?![\w])")
    return any(pattern.search(text) for text in texts)


def _module_texts(module: str) -> list[str] | None:
    """The sources of the package's modules named `module` (a file `module.py`, or a
    package `module/`), or None when the package has none."""
    texts = [text for path, text in _sources().items()
             if PACKAGE in path.parents and module in (path.stem, path.parent.name)]
    return texts or None


def test_every_path_the_page_cites_exists() -> None:
    text = _page()
    spans = [span for span in _spans(text) if PATH.match(span)]
    drawn = [path for block in FENCE.findall(text) for path in DRAWN_PATH.findall(block)]
    assert len(spans) > 40 and len(drawn) > 20
    # A file named alone (`claim.lua`) is one of the package's, wherever it is.
    missing = [span for span in spans if not _resolves(span, anywhere="/" not in span)]
    missing += [path for path in drawn if not _resolves(path, anywhere=True)]
    assert not missing, f"cited in docs/architecture.md, not in the repository: {missing}"


def test_every_name_the_page_cites_is_in_the_code() -> None:
    everything = list(_sources().values())
    missing = []
    names = [m.group(1) for span in _spans(_page())
             if (m := NAME.match(span)) and not PATH.match(span)]
    assert len(names) > 100
    for name in names:
        parts = name.split(".")
        if not all(_has_word(part, everything) for part in parts):
            missing.append(name)
            continue
        if len(parts) > 1:
            texts = _module_texts(parts[-2])
            if texts is not None and not _has_word(parts[-1], texts):
                missing.append(name)
    assert not missing, f"cited in docs/architecture.md, not in the package's code: {missing}"


def test_the_crash_point_table_lists_every_point() -> None:
    (path,) = PACKAGE.rglob("crash_points.py")
    module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
    crash_points = importlib.import_module(module)
    table = next(block for block in FENCE.findall(_page()) if "push.outbox_written" in block)
    listed = set(re.findall(r"\b[a-z]+(?:\.[a-z_]+)+\b", table)) - {"crash_points.py"}
    listed = {name for name in listed if not name.endswith((".py", ".lua"))}
    assert listed == set(crash_points.POINTS)
