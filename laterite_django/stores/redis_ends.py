"""The Redis store's side of chains and batches (workflows/).

A finished job of a workflow leaves Redis by the FINISH script, which in the same
step pushes the next link of its chain and appends its batch end to the `ended`
list. The batch's counts live in the database (workflows.counts) for every store:
`apply` counts the listed ends there, its callbacks going to the outbox in the same
transaction (moved to Redis at the commit), then takes the ends off the list. A
crash between the two leaves the ends listed, and the next `apply` (the worker's
next flush, or its sweep) counts them again, which moves nothing: each end is
counted once (its BatchEnd row). A job that fails for good is counted in the
transaction that writes its failed row.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from django.db import transaction
from django.utils import timezone

from ..workflows.counts import count_ends
from ..workflows.ending import End, any_marked, ends_of, ends_of_payloads, next_links
from . import redis_outbox
from .redis_failed import write_row
from .redis_values import pack, us

if TYPE_CHECKING:
    from .base import Claim, NewJob
    from .redis import RedisStore

__all__ = ["apply", "count_failed", "finish", "write_row_counted"]

logger = logging.getLogger("laterite")

# Ends counted per database transaction.
CHUNK = 500


def finish(store: RedisStore, claims: Sequence[Claim]) -> list[int]:
    """Delete finished jobs, those of a workflow with what their end brings; return
    each one's DELETE code (1 deleted, 0 gone, -1 the claim was lost)."""
    from .redis_values import job_fields

    plain = [c for c in claims if not any_marked([c])]
    codes = {}
    if plain:
        pairs = [value for c in plain for value in (c.id, c.token)]
        codes = dict(zip((c.id for c in plain), store._run("DELETE", pairs), strict=True))
    now = us(timezone.now())
    ended = False
    for claim in claims:
        if claim.id in codes:
            continue
        links: list[NewJob] = next_links(claim)
        record = ""
        batch_ends = ends_of([claim])
        if batch_ends:
            end = batch_ends[0]
            record = json.dumps([end.batch, end.position])
            ended = True
        jobs = pack(value for job in links for value in job_fields(job))
        codes[claim.id] = store._run("FINISH", [now, claim.id, claim.token, record, jobs])
    if ended:
        apply(store)
    return [int(codes[c.id]) for c in claims]


def apply(store: RedisStore) -> int:
    """Count the ends the `ended` list holds on their batches; return how many were
    taken off it. Never raises: what is not counted now is counted by the next call."""
    key = store.key("ended")
    taken = 0
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
                pipe.lrem(key, 1, raw)
            pipe.execute()
            taken += len(records)
    except Exception as e:
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
