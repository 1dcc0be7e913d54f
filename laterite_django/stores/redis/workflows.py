"""The Redis store's side of chains and batches (workflows/).

A finished job of a workflow leaves Redis by the FINISH script, which in the same
step pushes the next link of its chain and appends its batch end to the list of ends
of its worker process (the ends of one call as one item; `own_list`: each process
counts its own, so two never count the same ends at once). The batch's counts live
in the database (workflows.counts) for every store: `apply` counts the listed ends
there, the callbacks going to the outbox in the same transaction (moved to Redis at
the commit), then takes the ends off the list. A busy worker applies at most every
APPLY_EVERY seconds (one commit for many ends), an idle or stopping one at once, and
the sweep applies every list (those of workers that died). A crash between the count
and the removal leaves the ends listed, and the next `apply` counts them again,
which moves nothing: each end is counted once (its BatchEnd row). A job that fails
for good is counted in the transaction that writes its failed row.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from django.db import transaction
from django.utils import timezone

from ...core.crash_points import crash_point
from ...core.ending import End, any_marked, ends_of_payloads
from ...core.marks import marks_of
from ..callbacks import next_links
from ..database.workflows import count_ends, finish_settled
from . import outbox as redis_outbox
from .failed import write_row
from .values import pack, us

if TYPE_CHECKING:
    from ...core.values import Claim, NewJob
    from .store import RedisStore

__all__ = [
    "Counter",
    "apply",
    "apply_all",
    "apply_own",
    "apply_pending",
    "count_failed",
    "drop_batch",
    "finish",
    "finish_orphans",
    "finish_step",
    "listed",
    "own_list",
    "write_row_counted",
]

logger = logging.getLogger("laterite")

# Items of a list of ends counted per database transaction (each the ends of one
# FINISH call, or one end of DROP_BATCH); jobs looked at per DROP_BATCH call (each
# call holds Redis meanwhile).
ENDS_CHUNK = 500
CHUNK = 500
# Seconds between a busy worker's counts of the ends it listed.
APPLY_EVERY = 0.5



def own_list(store: RedisStore) -> str:
    """This process's list of ends: each worker process counts its own, so that two
    never count the same ends at once; the sweep counts those of the dead."""
    return store.key("ended", socket.gethostname(), str(os.getpid()))


def finish_step(store: RedisStore, claims: Sequence[Claim]) -> tuple[str, list[Any], bool]:
    """The call of finish.lua for finished jobs, some of a workflow: (script name,
    finish or finish_limited; its arguments after the prefix; whether it lists batch
    completions)."""
    from .values import job_fields

    now = str(us(timezone.now()))
    found: list[tuple[Claim, str, list[NewJob]]] = []
    ended = False
    for claim in claims:
        marks = marks_of(claim.payload)
        record = "" if marks.batch is None else f"[{marks.batch[0]},{marks.batch[1]}]"
        ended = ended or bool(record)
        found.append((claim, record, next_links(claim) if marks.chain else []))
    if any(job.concurrency_limit for _, _, links in found for job in links):
        # A next link runs under a concurrency limit: every link carries its key.
        entries = [[str(c.id), c.token, record, [value for job in links for value in (
            *job_fields(job), job.concurrency_key or "",
            "" if job.concurrency_limit is None else str(job.concurrency_limit))]]
            for c, record, links in found]
        return "finish_limited", [now, own_list(store), pack(entries)], ended
    entries = [[str(c.id), c.token, record, [value for job in links for value in job_fields(job)]]
               for c, record, links in found]
    return "finish", [now, own_list(store), pack(entries)], ended


def finish(store: RedisStore, claims: Sequence[Claim]) -> list[int]:
    """Delete finished jobs, those of a workflow with what their end brings, in one
    script call; return each one's DELETE code (1 deleted, 0 gone, -1 the claim was
    lost)."""
    name, args, ended = finish_step(store, claims)
    codes = store._run(name, args)
    if ended:
        listed(store)
    return [int(code) for code in codes]


def listed(store: RedisStore) -> None:
    """This process listed batch ends: count them if its last count is APPLY_EVERY s
    old (one database commit for many ends), in the worker's counting thread where it
    has one (Counter); else when it finds nothing to claim or stops (Store.flush).
    Ends of a worker that died: the sweep's."""
    crash_point("batch.count.after_finish")  # the ends listed, not counted
    store._ends_pending = True
    if time.monotonic() - store._ends_applied < APPLY_EVERY:
        return
    if store._ends_in_background:
        counter = store._ends_counter
        if counter is None or counter.pid != os.getpid():  # none yet in this process
            counter = store._ends_counter = Counter(store)
        store._ends_applied = time.monotonic()
        counter.due.set()
        return
    apply_own(store)


def apply_own(store: RedisStore) -> int:
    """Count this process's list, one count at a time; note that callbacks may wait."""
    with store._ends_lock:
        taken = apply(store)
        if taken:
            store._ends_counted = True
        return taken


class Counter:
    """The thread of a worker's process that counts the ends the process lists, so
    that the database's part of a count (a few milliseconds per thousand ends)
    overlaps the jobs the worker runs meanwhile. A count it has not made when the
    process dies is the sweep's, as for any worker that died."""

    def __init__(self, store: RedisStore) -> None:
        self.store = store
        self.pid = os.getpid()
        self.due = threading.Event()
        threading.Thread(target=self._run, name="laterite-batch-ends", daemon=True).start()

    def _run(self) -> None:
        from django.db import close_old_connections

        while True:
            self.due.wait()
            self.due.clear()
            close_old_connections()  # a connection an error left unusable goes
            apply_own(self.store)


def apply_pending(store: RedisStore) -> int:
    """Count the ends this process listed and has not counted yet (a worker going
    idle: the batch it worked on may be done); return how many ends were taken, at
    least 1 if some were counted since the last call (their callbacks, pushed after
    the worker's claim, wait to be claimed)."""
    with store._ends_lock:
        taken = apply(store) if store._ends_pending else 0
        counted, store._ends_counted = store._ends_counted, False
    return max(taken, int(counted))


def apply(store: RedisStore, key: str | None = None) -> int:
    """Count the ends this process's list (or list `key`) holds on their batches;
    return how many were taken off it. Never raises: what is not counted now is
    counted by the next call."""
    own = key is None
    key = own_list(store) if key is None else key
    taken = 0
    if own:
        store._ends_applied = time.monotonic()
        store._ends_pending = False
    try:
        while True:
            records = store.client.lrange(key, 0, ENDS_CHUNK - 1)
            if not records:
                return taken
            ends = []
            for raw in records:
                text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)
                # "[batch,position]" (DROP_BATCH), or several separated by spaces
                # (FINISH); "[batch,position,1]" a failed one (CLEAR)
                for record in text.split(" "):
                    try:
                        batch, position, *failed = record[1:-1].split(",")
                        ends.append(End(int(batch), int(position), failed == ["1"]))
                    except ValueError:
                        logger.error("An unreadable batch end in Redis was dropped: %r",
                                     record)
            with transaction.atomic(using=store.database):
                count_ends(store.database, ends, lambda jobs: redis_outbox.hold(store, jobs))
            crash_point("batch.count.after_count")  # counted, still listed
            # What was read is taken off; if another process (the sweep, counting a
            # live worker's list at the same moment) took some first, by value.
            store._run("take_completions", [key, b"\n".join(
                r if isinstance(r, bytes) else str(r).encode() for r in records)])
            taken += len(records)
            if len(records) < ENDS_CHUNK:
                return taken
    except Exception as e:
        if own:
            store._ends_pending = True
        logger.warning("Could not count the ends of batch jobs yet (%s); the next sweep "
                       "tries again.", e, extra={"action": "batch_ends_kept"})
        return taken


def apply_all(store: RedisStore) -> int:
    """Count the ends of every process's list (the sweep: those of workers that died
    before counting theirs), and forget the empty lists; return how many were taken."""
    try:
        keys = [k.decode() if isinstance(k, bytes) else str(k)
                for k in store.client.smembers(store.key("ended-lists"))]
    except Exception:
        return 0
    taken = sum(apply(store, key) for key in keys)
    if keys:
        with contextlib.suppress(Exception):
            store._run("forget_empty_lists", keys)
    return taken


def write_row_counted(store: RedisStore, claim: Claim, error: str,
                      link: dict[str, Any] | None = None) -> Any:
    """Write the failed row of `claim` (redis_failed.write_row) and count it on its
    batch, in one transaction."""
    rows = store._failed_rows(None)
    if not any_marked([claim]):
        return write_row(rows, claim, error, link)
    with transaction.atomic(using=store.database):
        row = write_row(rows, claim, error, link)
        count_failed(store, [claim.payload])
    return row


def finish_orphans(store: RedisStore) -> int:
    """The sweep's look for batches counted down to 0 whose callbacks were not pushed
    (workflows.counts.finish_settled): the same rule as the database store's, though
    here each count pushes them itself, so it finds none in the usual course."""
    return finish_settled(store.database, None, lambda jobs: redis_outbox.hold(store, jobs))


def count_failed(store: RedisStore, payloads: Sequence[str]) -> None:
    """Count jobs moved to the failed list on their batches (in the caller's transaction)."""
    count_ends(store.database, ends_of_payloads(payloads, failed=True),
               lambda jobs: redis_outbox.hold(store, jobs))


def drop_batch(store: RedisStore, batch_id: int) -> int:
    """Remove the waiting and delayed jobs of cancelled batch `batch_id`, counting each
    as ended; return how many. One script call per CHUNK jobs looked at, so Redis is
    never held long; a job that moves meanwhile is dropped by the worker that claims
    it (workflows.cancelled)."""
    removed = 0
    for raw in store.client.smembers(store.key("queues")):
        queue = raw.decode() if isinstance(raw, bytes) else str(raw)
        for kind in ("ready", "delayed"):
            start = 0
            while True:
                gone, seen = store._run("drop_batch", [int(batch_id), queue, kind, start, CHUNK,
                                                       own_list(store)])
                removed += int(gone)
                if int(seen) < CHUNK:
                    break
                start += CHUNK - int(gone)
    apply_own(store)
    return removed
