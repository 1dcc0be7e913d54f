"""The database stores' fair push (core/fairness.py): each job of a fair queue due now is
given its place in line, its fair tag, as its `available_at`, so the claim, which takes
a queue's due jobs of a priority oldest first, serves the keys in turn (its statements,
its index and its limits unchanged). A job pushed for later keeps its due time.

The queue's virtual time per priority is `laterite_fair_queue`'s row, locked by the push
(PostgreSQL: FOR UPDATE; SQLite: the write lock its INSERT takes) until the push's
commit; the end of each key's turn is `laterite_fair_turn`'s. Both in the push's
transaction, with the jobs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

from django.utils import timezone

from ...core.values import NewJob
from .sql import TABLE, aware

__all__ = ["FairTurns", "with_fair_places"]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_US = timedelta(microseconds=1)
QUEUE_TABLE = "laterite_fair_queue"
TURN_TABLE = "laterite_fair_turn"

# Params: queue, priority. The queue's row at that priority, made if missing.
ADD_QUEUE = (f"INSERT INTO {QUEUE_TABLE} (queue, priority, virtual_time, last_end) "
             f"VALUES (%s, %s, 0, 0) ON CONFLICT (queue, priority) DO NOTHING")
# Params: queue, priority. Its virtual time and last end (locked on PostgreSQL).
READ_QUEUE = (f"SELECT virtual_time, last_end FROM {QUEUE_TABLE} "
              f"WHERE queue = %s AND priority = %s")
# Params: virtual time, last end, queue, priority.
WRITE_QUEUE = (f"UPDATE {QUEUE_TABLE} SET virtual_time = %s, last_end = %s "
               f"WHERE queue = %s AND priority = %s")
# Params: queue, priority, now. The first due waiting job's place (the claim's index).
FIRST_DUE = (f"SELECT available_at FROM {TABLE} WHERE queue = %s AND token IS NULL "
             f"AND priority = %s AND available_at <= %s ORDER BY available_at LIMIT 1")
# Params: queue, key. Where the key's turn ends.
READ_TURN = f"SELECT ends FROM {TURN_TABLE} WHERE queue = %s AND key = %s"
# Params: queue, key, ends.
WRITE_TURN = (f"INSERT INTO {TURN_TABLE} (queue, key, ends) VALUES (%s, %s, %s) "
              f"ON CONFLICT (queue, key) DO UPDATE SET ends = excluded.ends")


def us(moment: datetime) -> int:
    """An aware datetime as integer microseconds since the epoch."""
    return (moment - _EPOCH) // _US


def moment(micro: int) -> datetime:
    """Microseconds since the epoch as an aware datetime."""
    return _EPOCH + timedelta(microseconds=micro)


class FairTurns:
    """The places in line of one push's fair jobs, read and written through `execute`
    (statement, params, fetch) -> (rows, rowcount) in the push's transaction."""

    def __init__(self, execute: Callable[..., tuple[list, int]], ts: Callable[[Any], Any],
                 lock: str) -> None:
        self._execute = execute
        self._ts = ts
        self._lock = lock
        self._queues: dict[tuple[str, int], list[int]] = {}  # [virtual time, last end]
        self._turns: dict[tuple[str, str], int] = {}
        self._first: dict[tuple[str, int], int | None] = {}
        self._now = timezone.now()

    def place(self, job: NewJob) -> int:
        """The fair tag of `job` (of a fair queue, due now), the queue's and its key's
        turns moved on past it."""
        assert job.fair_cost is not None
        queue, priority, key = job.queue, job.priority, job.fair_key or ""
        state = self.lock(queue, priority)
        first = self._first_due(queue, priority)
        state[0] = max(state[0], state[1] if first is None else first)
        if (queue, key) not in self._turns:
            rows, _ = self._execute(READ_TURN, [queue, key], True)
            self._turns[queue, key] = int(rows[0][0]) if rows else 0
        tag = max(state[0], self._turns[queue, key])
        self._turns[queue, key] = tag + job.fair_cost
        state[1] = max(state[1], tag + job.fair_cost)
        first = self._first[queue, priority]
        self._first[queue, priority] = tag if first is None else min(first, tag)
        return tag

    def _first_due(self, queue: str, priority: int) -> int | None:
        """The place of the queue's first due waiting job of `priority`, counting those
        this push placed already; None if none waits."""
        if (queue, priority) not in self._first:
            rows, _ = self._execute(FIRST_DUE, [queue, priority, self._ts(self._now)], True)
            self._first[queue, priority] = us(aware(rows[0][0])) if rows else None
        return self._first[queue, priority]

    def lock(self, queue: str, priority: int) -> list[int]:
        """The queue's [virtual time, last end] at `priority`, its row locked (made if
        missing) until the push's commit."""
        if (queue, priority) not in self._queues:
            self._execute(ADD_QUEUE, [queue, priority])
            rows, _ = self._execute(READ_QUEUE + self._lock, [queue, priority], True)
            virtual_time, last_end = rows[0]
            self._queues[queue, priority] = [int(virtual_time) or us(self._now),
                                             int(last_end)]
        return self._queues[queue, priority]

    def save(self) -> None:
        """Write the turns moved on (before the push's commit)."""
        for (queue, priority), (virtual_time, last_end) in self._queues.items():
            self._execute(WRITE_QUEUE, [virtual_time, last_end, queue, priority])
        for (queue, key), ends in self._turns.items():
            self._execute(WRITE_TURN, [queue, key, ends])


def with_fair_places(jobs: Sequence[NewJob], turns: FairTurns) -> list[NewJob]:
    """`jobs`, those of a fair queue due now given their place in line as their due time
    (see the module's docstring); the others as they are."""
    # Every queue row locked first, in one order, so two pushes never wait for each other
    # in a circle.
    for queue, priority in sorted({(job.queue, job.priority) for job in jobs
                                   if job.fair_cost is not None}):
        turns.lock(queue, priority)
    placed = []
    for job in jobs:
        due_now = job.available_at <= job.pushed_at if job.delay is None else not job.delay
        if job.fair_cost is None or job.debounce is not None or not due_now:
            placed.append(job)
            continue
        placed.append(replace(job, available_at=moment(turns.place(job)), delay=None))
    return placed
