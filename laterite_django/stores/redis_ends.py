"""The Redis store's side of chains and batches (workflows/).

A finished job of a workflow leaves Redis by the FINISH script, which in the same
step pushes the next link of its chain and appends its batch end to the `ended`
list. The batch's counts live in the database (workflows.counts) for every store:
`apply` counts the listed ends there, its callbacks going to the outbox in the same
transaction (moved to Redis at the commit), then takes the ends off the list; a
busy worker applies at most every APPLY_EVERY seconds (one commit for many ends), an
idle one at once. A
crash between the two leaves the ends listed, and the next `apply` (the worker's
next flush, or its sweep) counts them again, which moves nothing: each end is
counted once (its BatchEnd row). A job that fails for good is counted in the
transaction that writes its failed row.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from django.db import transaction
from django.utils import timezone

from ..workflows.counts import count_ends
from ..workflows.ending import End, any_marked, ends_of, ends_of_payloads, next_links
from . import redis_calls, redis_limits, redis_outbox
from .redis_failed import write_row
from .redis_scripts import _COMMON
from .redis_values import pack, us

if TYPE_CHECKING:
    from .base import Claim, NewJob
    from .redis import RedisStore

__all__ = ["DROP_BATCH", "apply", "apply_pending", "count_failed", "drop_batch", "finish",
           "write_row_counted"]

logger = logging.getLogger("laterite")

# Ends counted per database transaction; jobs looked at per DROP_BATCH call.
CHUNK = 500
# Seconds between a busy worker's counts of the ends it listed.
APPLY_EVERY = 0.25

# ARGV: prefix, batch id, queue, 'ready' or 'delayed', start, count. Looks at `count`
# jobs of that set from index `start` and removes those of the batch (not claimed:
# a claimed job is in neither set), listing each one's end as FINISH does. Returns
# {removed, looked at}.
DROP_BATCH = _COMMON + """
local batch, q, kind = ARGV[2], ARGV[3], ARGV[4]
local start, count = tonumber(ARGV[5]), tonumber(ARGV[6])
local set = qkey(q, kind)
local members = redis.call('ZRANGE', set, start, start + count - 1)
local removed = 0
for _, m in ipairs(members) do
  local id = m
  if kind == 'ready' then id = member_id(m) end
  local k = jkey(id)
  local payload = redis.call('HGET', k, 'payload')
  local b, pos = nil, nil
  -- The mark is the payload's last key (workflows.marks): a list in the arguments
  -- that looks like it is not taken for it.
  if payload then b, pos = string.match(payload, '"batch":%[(%d+),(%d+)%]}$') end
  if b == batch then
    drop_key(k, id)
    redis.call('ZREM', set, m)
    redis.call('DEL', k)
    redis.call('RPUSH', P .. ':ended', '[' .. b .. ',' .. pos .. ']')
    removed = removed + 1
  end
end
return {removed, #members}
"""
redis_calls.register("DROP_BATCH", DROP_BATCH)


def finish(store: RedisStore, claims: Sequence[Claim]) -> list[int]:
    """Delete finished jobs, those of a workflow with what their end brings, in one
    script call; return each one's DELETE code (1 deleted, 0 gone, -1 the claim was
    lost)."""
    from .redis_values import job_fields

    now = str(us(timezone.now()))
    found: list[tuple[Claim, str, list[NewJob]]] = []
    ended = False
    for claim in claims:
        record = ""
        for end in ends_of([claim]):
            record = f"[{end.batch},{end.position}]"
            ended = True
        found.append((claim, record, next_links(claim)))
    if any(job.concurrency_limit for _, _, links in found for job in links):
        # A next link runs under a concurrency limit: every link carries its key.
        entries = [[str(c.id), c.token, record, [value for job in links for value in (
            *job_fields(job), job.concurrency_key or "",
            "" if job.concurrency_limit is None else str(job.concurrency_limit))]]
            for c, record, links in found]
        codes = redis_limits.run(store.client, redis_limits.FINISH_LIMITED,
                                 [store.prefix, now, pack(entries)])
    else:
        entries = [[str(c.id), c.token, record,
                    [value for job in links for value in job_fields(job)]]
                   for c, record, links in found]
        codes = store._run("FINISH", [now, pack(entries)])
    if ended:
        # Counted at most every APPLY_EVERY s by each worker (one database commit for
        # many ends), and when it finds nothing to claim or stops (Store.flush); ends
        # of a worker that died are counted by the sweep.
        store._ends_pending = True
        if time.monotonic() - store._ends_applied >= APPLY_EVERY:
            apply(store)
    return [int(code) for code in codes]


def apply_pending(store: RedisStore) -> int:
    """Count the ends this process listed and has not counted yet (a worker going
    idle: the batch it worked on may be done); return how many ends were taken."""
    return apply(store) if store._ends_pending else 0


def apply(store: RedisStore) -> int:
    """Count the ends the `ended` list holds on their batches; return how many were
    taken off it. Never raises: what is not counted now is counted by the next call."""
    key = store.key("ended")
    taken = 0
    store._ends_applied = time.monotonic()
    store._ends_pending = False
    try:
        while True:
            records = store.client.lrange(key, 0, CHUNK - 1)
            if not records:
                return taken
            ends = []
            for raw in records:
                try:
                    batch, position = json.loads(raw)
                    ends.append(End(int(batch), int(position)))
                except (TypeError, ValueError):
                    logger.error("An unreadable batch end in Redis was dropped: %r", raw)
            with transaction.atomic(using=store.database):
                count_ends(store.database, ends, lambda jobs: redis_outbox.hold(store, jobs))
            pipe = store.client.pipeline(transaction=False)
            for raw in records:
                pipe.lrem(key, 1, raw)  # type: ignore[arg-type]
            pipe.execute()
            taken += len(records)
            if len(records) < CHUNK:
                return taken
    except Exception as e:
        store._ends_pending = True
        logger.warning("Could not count the ends of batch jobs yet (%s); the next sweep "
                       "tries again.", e, extra={"action": "batch_ends_kept"})
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
                gone, seen = store._run("DROP_BATCH", [int(batch_id), queue, kind, start, CHUNK])
                removed += int(gone)
                if int(seen) < CHUNK:
                    break
                start += CHUNK - int(gone)
    apply(store)
    return removed
