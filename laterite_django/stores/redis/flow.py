"""The Redis store's flow control: paused queues, cancels (see flow/).

Under the prefix `P`: `P:paused` is the set of paused queue names; a running
job's hash gets `cancel_requested` when a cancel is asked, which its worker's
heartbeat reads.

A cancelled waiting job moves to the failed list as a claimed job does in
`fail()`, so a crash at any point loses nothing: the CANCEL script takes it out
of its queue and holds it under a claim of the cancel's own (token
`cancel-...`, marked `failing`); then its row is written to the failed list,
keyed by that claim (`FailedJob.claim_token`); then the claim is deleted. If
the process dies before the row, the workers' sweep finds the marked claim
once `LATERITE_QUEUE_RETRY_AFTER` has passed, with no row, and finishes the
cancel (`finish_cancel`: writes the row, deletes the job); if it dies after
the row, the sweep finds the row and deletes the job. A cancelled job never
runs again.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from django.db import transaction

from ...core.cancel import Outcome, reason
from ...core.crash_points import crash_point
from ...core.values import Claim, job_ids
from . import workflows as redis_ends
from .failed import claim_token, failed_row, retried_link
from .values import dt, text, us

if TYPE_CHECKING:
    from .store import RedisStore

__all__ = ["CANCEL_TOKEN", "cancel", "cancel_requested", "finish_cancel",
           "pause", "paused_queues", "resume"]

# The first characters of the token a cancel holds a waiting job under (a worker's
# claim token is a bare uuid4 hex, so the two never meet).
CANCEL_TOKEN = "cancel-"


def pause(store: RedisStore, queues: Sequence[str]) -> None:
    if queues:
        store.client.sadd(store.key("paused"), *queues)


def resume(store: RedisStore, queues: Sequence[str]) -> None:
    if queues:
        store._run("resume", queues)


def paused_queues(store: RedisStore) -> set[str]:
    return {text(q) for q in store.client.smembers(store.key("paused"))}


def cancel(store: RedisStore, ids: Iterable[int]) -> dict[int, str]:
    wanted = list(dict.fromkeys(job_ids(ids)))
    if not wanted:
        return {}
    token = f"{CANCEL_TOKEN}{uuid.uuid4().hex}"
    rows = store._run("cancel", [us(store_now()), token, *wanted])
    crash_point("cancel.after_hold")  # held under the cancel's claim, no row yet
    result: dict[int, str] = {}
    failed: list[Any] = []
    for row in rows:
        job_id, outcome = int(row[0]), text(row[1])
        result[job_id] = outcome
        if outcome == Outcome.CANCELLED:
            name, queue, payload, priority, key, attempts, pushed_at, link_id, link_error = row[2:]
            claim = Claim(id=job_id, name=text(name), queue=text(queue), payload=text(payload),
                          attempts=int(attempts or 0), pushed_at=dt(pushed_at), token=token,
                          unique_key=text(key) or None, priority=int(priority or 0))
            fields = failed_row(claim, reason(False))
            fields["claim_token"] = claim_token(claim)
            if text(link_id):
                fields.update(retried_from_id=int(link_id), retried_from_error=text(link_error))
            failed.append(fields)
    if failed:
        from ...models import FailedJob

        # The rows first (one statement), then the jobs leave Redis: see the docstring.
        with transaction.atomic(using=store.database):
            FailedJob.objects.using(store.database).bulk_create(
                [FailedJob(**fields) for fields in failed])
            redis_ends.count_failed(store, [fields["payload"] for fields in failed])
        crash_point("cancel.after_rows")  # the rows written, the jobs still held
        store._run("delete", [value for fields in failed
                              for value in (fields["job_id"], token)])
    return result


def finish_cancel(store: RedisStore, job_id: int, token: str) -> None:
    """Finish a cancel whose process died before the failed row was written (the
    sweep calls this for a marked claim under a cancel token that has no row)."""
    k = store.key("job", str(job_id))
    fields = [text(v) if v is not None else None for v in store.client.hmget(
        k, "token", "name", "queue", "payload", "priority", "unique_key", "attempts",
        "pushed_at")]
    if fields[0] != token:
        return  # finished meanwhile
    name, queue, payload, priority, key, attempts, pushed_at = fields[1:]
    claim = Claim(id=job_id, name=name or "", queue=queue or "", payload=payload or "",
                  attempts=int(attempts or 0), pushed_at=dt(pushed_at) or store_now(),
                  token=token, unique_key=key or None, priority=int(priority or 0))
    redis_ends.write_row_counted(store, claim, reason(False), retried_link(store, job_id))
    store._run("delete", [job_id, token])


def cancel_requested(store: RedisStore, claims: Sequence[Claim]) -> set[int]:
    if not claims:
        return set()
    pipe = store.client.pipeline(transaction=False)
    for claim in claims:
        pipe.hmget(store.key("job", str(claim.id)), "token", "cancel_requested")
    found = set()
    for claim, (token, asked) in zip(claims, pipe.execute(), strict=True):
        if asked is not None and token is not None and text(token) == claim.token:
            found.add(claim.id)
    return found


def store_now():
    from django.utils import timezone

    return timezone.now()
