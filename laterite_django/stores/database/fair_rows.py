"""The database stores' fair queues seen and kept (`FairRows`, owned by DatabaseStore):
the waiting jobs per fair key (the job's `fair_key` column, the index `laterite_job_fair_waiting`),
and the pruning of the turns (`laterite_fair_turn`) no key needs any more.

A key's turn row holds where its turn ends (fair.py). It may go once no job of the key
waits and its end is no later than the place any key arriving now would get anyway: the
clock (where a priority not yet seen starts) and, at each priority with a due job
waiting, the queue's virtual time there (the later of its row's and its first due job's
place, as the next push reads it). A push of the key then gets the very place it would
have got with the row, so pruning changes no job's turn. At a priority where nothing is
due, the line starts again: the key starts there as a key never seen, as every key does.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime
from typing import Any

from django.db import connections, transaction
from django.utils import timezone

from ...core.fairness import PRUNE_EVERY, WaitingByKey
from .fair import FIRST_DUE, QUEUE_TABLE, TURN_TABLE, us
from .sql import TABLE, aware

__all__ = ["FairRows"]

# The fair queues: those a push gave a place in line.
FAIR_QUEUES = f"SELECT DISTINCT queue FROM {QUEUE_TABLE} ORDER BY queue"
# Params: queue, top. The `top` keys with the most waiting jobs, each with how many, and
# with how many keys have one (the window counts the groups).
WAITING_BY_KEY = (
    f"SELECT fair_key, count(*), count(*) OVER () FROM {TABLE} "
    f"WHERE queue = %s AND token IS NULL AND fair_key IS NOT NULL "
    f"GROUP BY fair_key ORDER BY count(*) DESC, fair_key LIMIT %s"
)
# The queues with turns kept.
TURN_QUEUES = f"SELECT DISTINCT queue FROM {TURN_TABLE} ORDER BY queue"
# Params: queue. Its rows per priority, locked in the order a push locks them
# (PostgreSQL; SQLite: the write lock is taken by LOCK_QUEUE_SQLITE first).
QUEUE_ROWS = (f"SELECT priority, virtual_time FROM {QUEUE_TABLE} WHERE queue = %s "
              f"ORDER BY priority")
# Params: queue. Takes SQLite's write lock at once, as a push's first write does.
LOCK_QUEUE_SQLITE = (f"UPDATE {QUEUE_TABLE} SET virtual_time = virtual_time "
                     f"WHERE queue = %s")
# Params: queue, bound. The turns of the keys without a waiting job that end no later
# than `bound` (the end checked again on the row a concurrent push may have moved on).
PRUNE_TURNS = (
    f"DELETE FROM {TURN_TABLE} WHERE queue = %s AND ends <= %s AND NOT EXISTS ("
    f"SELECT 1 FROM {TABLE} WHERE {TABLE}.queue = {TURN_TABLE}.queue "
    f"AND {TABLE}.fair_key = {TURN_TABLE}.key AND {TABLE}.token IS NULL)"
)


class FairRows:
    """A database store's fair queues: the waiting jobs per key (Store.fair_waiting) and
    the pruning of the turns no key needs (Store.prune_fair_turns, and at tidy)."""

    def __init__(self, database: str,
                 execute: Callable[..., tuple[list, int]],
                 ts: Callable[[datetime | None], Any]) -> None:
        self.database = database
        self._execute = execute  # the store's: one statement on its connection
        self._ts = ts  # a datetime as the database takes it
        self.pruned_at = 0.0  # monotonic time of the next pruning by `prune_now`

    @property
    def postgres(self) -> bool:
        return connections[self.database].vendor == "postgresql"

    def waiting(self, top: int) -> dict[str, WaitingByKey]:
        """The `top` keys with the most waiting jobs, per fair queue."""
        found = {}
        for (queue,) in self._execute(FAIR_QUEUES, [], True)[0]:
            rows, _ = self._execute(WAITING_BY_KEY, [queue, top], True)
            if rows:
                found[queue] = WaitingByKey(
                    top=tuple((key, int(count)) for key, count, _ in rows),
                    keys=int(rows[0][2]))
        return found

    def prune(self) -> int:
        """Delete the turns no key needs, a queue per transaction; return how many."""
        pruned = 0
        for (queue,) in self._execute(TURN_QUEUES, [], True)[0]:
            with transaction.atomic(using=self.database):
                pruned += self._prune_queue(queue)
        return pruned

    def _prune_queue(self, queue: str) -> int:
        """Delete the turns of `queue` no key needs (see the module's docstring), its
        turn rows locked against its pushes meanwhile."""
        postgres = self.postgres
        if not postgres:
            self._execute(LOCK_QUEUE_SQLITE, [queue])
        rows, _ = self._execute(QUEUE_ROWS + (" FOR UPDATE" if postgres else ""),
                                [queue], True)
        now = timezone.now()
        bound = us(now)
        for priority, virtual_time in rows:
            first, _ = self._execute(FIRST_DUE, [queue, priority, self._ts(now)], True)
            if first:
                bound = min(bound, max(int(virtual_time), us(aware(first[0][0]))))
        return self._execute(PRUNE_TURNS, [queue, bound])[1]

    def prune_now(self) -> int:
        """Prune the turns if PRUNE_EVERY seconds have passed since this store last did
        (tidy, every few seconds from each worker)."""
        if time.monotonic() < self.pruned_at:
            return 0
        self.pruned_at = time.monotonic() + PRUNE_EVERY
        return self.prune()
