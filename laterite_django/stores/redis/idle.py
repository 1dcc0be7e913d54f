"""When an idle worker on Redis may wait without sweeping: its quiet look, and the
state of the quiet wait that follows (see redis_wait).

A worker idle for a moment looks, in one script (QUIET), at what a sweep or a
claim of its own could find: a job due on its queues, a job claimed on any queue,
a batch's ends not yet counted; and, in the database, jobs left in the outbox or
a batch counted to 0 whose callbacks were not pushed. Finding none, it is quiet:
until its next delayed job, at most QUIET_LONGEST, it blocks on its queues'
wake-up lists and a list of its own, and sends nothing else. The script that
finds it quiet also enters its own list in `P:quiet`, in the same step; from then
on the next claim of any job, on any queue, pushes to that list (redis_scripts'
`wake_quiet`), so a quiet worker sweeps again whenever a job is held somewhere,
as before. A quiet worker that is told to stop pushes to it itself, from another
connection, to end its pop (redis_wait).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from django.db import connections

from ..base import QUIET_LONGEST
from . import scripts as calls
from .keys import IDLE_TOKEN_TTL

if TYPE_CHECKING:
    from .store import RedisStore

__all__ = ["QuietState", "database_busy", "look", "own_key", "wake_own"]

# What the database holds that a Redis store's sweep would act on: outbox rows that
# could not reach Redis at their commit, batches counted to 0 with callbacks unpushed.
_DATABASE_BUSY = (
    "SELECT EXISTS (SELECT 1 FROM laterite_outbox_job) "
    "OR EXISTS (SELECT 1 FROM laterite_batch WHERE pending <= 0 AND finished_at IS NULL)"
)


def own_key(store: RedisStore, worker: str) -> str:
    """The wake-up list of worker `worker` alone (a broadcast of claims, or its stop)."""
    return store.key("worker", worker, "wake")


class QuietState:
    """Per store: each thread's quiet spell, and since when its worker has been idle."""

    def __init__(self) -> None:
        self._local = threading.local()

    def idle_for(self, popped: float) -> float:
        """Seconds since this thread's worker found nothing: since the start of its first
        empty pop (of `popped` seconds, if the one just made) since it was woken, or
        since its last look."""
        since = getattr(self._local, "idle_since", None)
        now = time.monotonic()
        if since is None:
            self._local.idle_since = since = now - popped
        return now - since

    def busy(self) -> None:
        """Woken, or looked: idle from the next empty pop on."""
        self._local.idle_since = None

    def until(self) -> float | None:
        """When this thread's quiet spell ends (time.time()), None if it is not quiet."""
        until = getattr(self._local, "until", None)
        return until if until is not None and time.time() < until else None

    def begin(self, until: float) -> None:
        self._local.until = until

    def end(self) -> None:
        self._local.until = None


def look(store: RedisStore, queues: Sequence[str], worker: str, now_us: int) -> bool:
    """Look once whether this thread's worker is quiet (the module docstring); if so,
    begin its quiet spell, until its next delayed job or QUIET_LONGEST from now."""
    quiet, earliest = calls.run(
        store.client, "look_idle", [store.prefix, now_us, own_key(store, worker), *queues])
    if not int(quiet) or database_busy(store):
        return False
    until = time.time() + QUIET_LONGEST
    if earliest:
        until = min(until, int(earliest) / 1_000_000)
    store.quiet_state.begin(until)
    return True


def database_busy(store: RedisStore) -> bool:
    """Whether the database holds work for a sweep (outbox rows, unpushed callbacks)."""
    with connections[store.database].cursor() as cursor:
        cursor.execute(_DATABASE_BUSY)
        return bool(cursor.fetchone()[0])


def wake_own(store: RedisStore, worker: str) -> None:
    """End the quiet pop of `worker` (it is stopping): a token on its own list."""
    key = own_key(store, worker)
    pipe = store.client.pipeline(transaction=False)
    pipe.rpush(key, "stop")
    pipe.expire(key, IDLE_TOKEN_TTL)
    pipe.execute()
