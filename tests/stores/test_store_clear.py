"""clear() on every store: an empty queue name is refused, never read as "every queue"."""

from __future__ import annotations

import pytest
from django.utils import timezone

from laterite_django.stores import NewJob

__all__: list[str] = []


def new(queue: str) -> NewJob:
    now = timezone.now()
    return NewJob(name="tests.record", queue=queue, payload='{"args":["x"],"kwargs":{}}',
                  available_at=now, pushed_at=now)


def test_clear_of_an_empty_queue_name_is_refused_and_deletes_nothing(store):
    store.push([new("default"), new("mail")])
    with pytest.raises(ValueError, match=r"queue is ''"):
        store.clear("")
    counts = store.counts()
    assert (counts["default"].total, counts["mail"].total) == (1, 1)
