"""The manual's Python examples, run: a renamed argument or setting breaks the suite.

A fenced ```python block in docs/ right after an HTML comment is runnable:

- `<!-- run -->`: the block runs on its own, in a fresh namespace.
- `<!-- run: continued -->`: the block runs after the page's runnable blocks before it
  (back to the last plain `<!-- run -->`), in their namespace: a page's later
  examples may use the jobs its earlier ones defined. What those earlier blocks wrote
  to the database is rolled back before this one runs, as a new test starts afresh.
- A block that defines test cases has them run too: its `unittest.TestCase` classes
  (Django's `TestCase` included) and its `test_*` functions that take no argument.
- `<!-- run: settings -->`: a settings snippet. It runs, then its LATERITE_* names are
  set (override_settings; its CACHES too, if it has some) and laterite's validation
  and system checks must pass.

Each block is a test of its own, named by its file and line. It runs in the test
settings (SQLite or PostgreSQL, the database store, LATERITE_QUEUE_MODE "external"),
inside a test transaction (as in a Django TestCase, so `run_jobs()` runs what the block
pushed), with a temporary folder as the working directory and BASE_DIR. The jobs a
block defines are forgotten after it. Examples of other libraries' code (the migration
guides' Celery, RQ... calls) are plain ```python blocks without the comment.
"""

from __future__ import annotations

import contextlib
import inspect
import re
import unittest
from dataclasses import dataclass
from pathlib import Path

import pytest
from django.core import checks
from django.db import transaction
from django.test import override_settings

from laterite_django.conf import validate_all
from laterite_django.registry import registry
from laterite_django.stores import reset_store
from tests.conftest import ROOT

DOCS = ROOT / "docs"
MARK = re.compile(r"^<!--\s*run(?::\s*(continued|settings))?\s*-->\s*$")
FENCE = re.compile(r"^(`{3,})python\s*$")


class _RolledBack(Exception):
    """Raised to roll back what a page's earlier blocks wrote."""


@dataclass(frozen=True)
class Block:
    path: Path
    line: int  # 1-based line of the code's first line
    kind: str  # "run", "continued" or "settings"
    code: str
    before: tuple[str, ...]  # the code of the page's earlier blocks this one continues

    @property
    def id(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def blocks_of(path: Path) -> list[Block]:
    """The runnable blocks of one page; raise ValueError on a mark with no block."""
    lines = path.read_text(encoding="utf-8").split("\n")
    found: list[Block] = []
    chain: list[str] = []
    index = 0
    while index < len(lines):
        mark = MARK.match(lines[index])
        index += 1
        if not mark:
            continue
        kind = mark.group(1) or "run"
        while index < len(lines) and not lines[index].strip():
            index += 1
        fence = FENCE.match(lines[index]) if index < len(lines) else None
        if not fence:
            raise ValueError(f"{path}:{index}: a run mark not followed by a ```python block")
        start = index + 1
        end = start
        while end < len(lines) and lines[end].strip() != fence.group(1):
            end += 1
        code = "\n".join(lines[start:end]) + "\n"
        if kind == "run":
            chain = []
        found.append(Block(path, start + 1, kind, code, tuple(chain)))
        if kind != "settings":
            chain.append(code)
        index = end + 1
    return found


def all_blocks() -> list[Block]:
    return [block for path in sorted(DOCS.rglob("*.md")) for block in blocks_of(path)]


BLOCKS = all_blocks()


def test_the_manual_has_runnable_examples():
    assert len(BLOCKS) >= 25, [block.id for block in BLOCKS]


@pytest.fixture
def forget_new_jobs():
    """Unregister the jobs a block defined, so the next block may define its own."""
    before = set(registry.names())
    yield
    for name in set(registry.names()) - before:
        registry.unregister(name)


def run_its_tests(namespace: dict, module: str) -> None:
    """Run the test cases and test functions the block defined."""
    loader = unittest.TestLoader()
    for value in list(namespace.values()):
        if getattr(value, "__module__", None) != module:
            continue
        if isinstance(value, type) and issubclass(value, unittest.TestCase):
            result = unittest.TextTestRunner(verbosity=0).run(
                loader.loadTestsFromTestCase(value))
            assert result.wasSuccessful(), result.failures + result.errors
        elif (inspect.isfunction(value) and value.__name__.startswith("test_")
              and not inspect.signature(value).parameters):
            value()


@pytest.mark.django_db
@pytest.mark.parametrize("block", BLOCKS, ids=[block.id for block in BLOCKS])
def test_example(block: Block, tmp_path, monkeypatch, forget_new_jobs):
    monkeypatch.chdir(tmp_path)
    module = "docs_example_" + re.sub(r"\W", "_", block.id)
    namespace: dict = {"__name__": module, "BASE_DIR": tmp_path}
    reset_store()
    try:
        with contextlib.suppress(_RolledBack), transaction.atomic():
            for code in block.before:
                exec(compile(code, f"{block.path}:earlier", "exec"), namespace)
            raise _RolledBack
        exec(compile(block.code, block.id, "exec"), namespace)
        run_its_tests(namespace, module)
        if block.kind == "settings":
            names = {name: value for name, value in namespace.items()
                     if name.startswith("LATERITE_")}
            assert names, "a settings block sets no LATERITE_ setting"
            if "CACHES" in namespace:  # a queue's cache alias is checked against them
                names["CACHES"] = namespace["CACHES"]
            with override_settings(**names):
                validate_all()
                errors = [message for message in checks.run_checks()
                          if message.level >= checks.ERROR
                          and message.id and message.id.startswith("laterite.")]
                assert errors == []
    finally:
        reset_store()
