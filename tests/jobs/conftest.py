"""Fixtures of the push tests: jobs a test defines on the fly, and an empty store."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from laterite_django import registry


@pytest.fixture
def scratch_jobs() -> Iterator[list[str]]:
    """Unregister the jobs a test defines on the fly (it appends their names)."""
    names: list[str] = []
    yield names
    for name in names:
        registry.unregister(name)


def nothing_stored(store) -> bool:
    """Whether `store` holds no job at all, in any queue or state."""
    return all(c.total == 0 for c in store.counts().values())
