"""The tests never reconfigure or empty the machine's own Redis, which serves others
too: a test that needs a server set otherwise starts a private `redis-server` with its
settings as arguments (tests/management/test_store_warnings.py's `private_redis`,
tests/worker/test_redis_worker.py's `own_redis`), and tests delete only the keys under
their own prefix (tests/conftest.py's `flush_redis`)."""

from __future__ import annotations

import re
from pathlib import Path

from tests.conftest import ROOT

# CONFIG SET, FLUSHALL and FLUSHDB, as redis-py's methods or as raw commands.
FORBIDDEN = re.compile(
    r"\b(config_set|flushall|flushdb)\s*\("
    r"|[\"']config[\"']\s*,\s*[\"']set[\"']|[\"'](config set|flushall|flushdb)\b",
    re.IGNORECASE)


def test_no_test_reconfigures_or_empties_a_redis_server():
    this = Path(__file__).resolve()
    found = [f"{path.relative_to(ROOT)}:{n}: {line.strip()}"
             for path in sorted((ROOT / "tests").rglob("*.py")) if path.resolve() != this
             for n, line in enumerate(path.read_text().splitlines(), 1)
             if FORBIDDEN.search(line)]
    assert found == []
