"""The Redis store's side of the failed list (which lives in the database).

Each row the Redis store writes carries its claim (`claim_token`, "<job id>:<claim
token>"), so a repeated fail() of one claim finds its row instead of writing a second,
and retrying or forgetting a row first finishes the job's removal from Redis if the
worker died before doing it: a handled row never brings its job back.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

from ...core.crash_points import crash_point
from . import outbox as redis_outbox

if TYPE_CHECKING:
    from ...core.values import Claim, NewJob

__all__ = ["after_removals", "claim_token", "failed_row", "link_retried", "marked_claims",
           "push_retried", "retried_link", "row_exists", "write_row"]

logger = logging.getLogger("laterite")

# Claims per call of the DELETE script when retry() or forget() finishes removals.
_CHUNK = 1000

_LINK_FIELDS = ("retried_from_id", "retried_from_error")


def claim_token(claim: Claim) -> str:
    """The FailedJob.claim_token of a claim: "<job id>:<token>"."""
    return f"{claim.id}:{claim.token}"


def _fit(field: str, value: str | None, notes: list[str]) -> str | None:
    """Cut `value` to the column's length, saying so in `notes` (with the whole value)."""
    from ...models import FailedJob

    limit = getattr(FailedJob._meta.get_field(field), "max_length", None)
    if value is None or limit is None or len(value) <= limit:
        return value
    notes.append(
        f"The job's {field.replace('_', ' ')} was {value!r} ({len(value)} characters); "
        f"the failed list keeps its first {limit}."
    )
    return value[:limit]


def link_retried(store: Any, links: Sequence[tuple[int, Any]]) -> None:
    """Record in each retried job's data (its new id, its FailedJob) the failed job it
    came from and that one's error, so a failure of the retry shows where it came from."""
    for start in range(0, len(links), _CHUNK):
        args = [value for job_id, failed in links[start : start + _CHUNK]
                for value in (job_id, failed.pk, failed.error_summary)]
        store._run("link_retried", args)


def push_retried(store: Any, jobs: Sequence[NewJob], rows: Sequence[Any]) -> list[int | None]:
    """Put the retried `jobs` (one per failed row of `rows`) in the outbox, in the
    retry's transaction, and link each to its row once moved; return no ids to link now.

    Pushed to Redis at once, a job would stay queued by a retry that does not commit
    (its process killed, an error after the push) while its row stays for another
    retry: one more copy each time. Through the outbox the jobs reach Redis only once
    the rows' deletion commits, each once (redis_outbox), and a push no replica
    confirmed counts as moved, logged: its job is on the primary.
    """
    def link(ids: list[int | None]) -> None:
        try:
            link_retried(store, [(i, row) for i, row in zip(ids, rows, strict=True) if i])
        except Exception as e:  # the jobs are queued: only their link is missing
            logger.warning("Could not record on the retried jobs the failed job each came "
                           "from (%s).", e, extra={"action": "retry_not_linked"})

    redis_outbox.hold(store, jobs, then=link)
    return [None] * len(jobs)


def retried_link(store: Any, job_id: int) -> dict[str, Any]:
    """The `retried_from_*` FailedJob fields of a job in Redis (none if not a retry)."""
    found, error = store.client.hmget(store.key("job", str(job_id)), *_LINK_FIELDS)
    if not found:
        return {}
    return {"retried_from_id": int(found), "retried_from_error": error.decode()}


def failed_row(claim: Claim, error: str) -> dict[str, Any]:
    """The FailedJob fields for `claim`. Data stored in Redis may be longer than the
    columns allow: it is cut to fit, with a note in the error, so fail() never raises."""
    notes: list[str] = []
    fields = {
        "job_id": claim.id,
        "name": _fit("name", claim.name, notes),
        "queue": _fit("queue", claim.queue, notes),
        "payload": claim.payload,
        "priority": claim.priority,
        "unique_key": _fit("unique_key", claim.unique_key, notes),
        "attempts": claim.attempts,
        "pushed_at": claim.pushed_at,
        "failed_at": timezone.now(),
        "error": error,
    }
    if notes:
        fields["error"] = "\n\n".join([error, *notes])
    return fields


def write_row(rows: Any, claim: Claim, error: str, link: dict[str, Any] | None = None) -> Any:
    """Return the failed row of this claim, writing it unless an earlier call did;
    `link` adds the `retried_from_*` fields (see retried_link).

    The insert is its own statement (committed at once outside a transaction), so
    a worker that dies after it leaves the row for the sweep to find.
    """
    key = claim_token(claim)
    row = rows.filter(claim_token=key).first()
    if row is not None:
        return row
    try:
        return rows.create(claim_token=key, **failed_row(claim, error), **(link or {}))
    except IntegrityError:  # written meanwhile by a repeat of this call
        return rows.get(claim_token=key)


def row_exists(
    rows: Any, token: str, job_id: int, name: str | None, queue: str | None, pushed_at: Any
) -> bool:
    """Whether the failed list holds the row of this claim. Rows written before
    claim_token existed are matched by the job's id, name, queue and push time."""
    legacy = Q(claim_token__isnull=True, job_id=job_id, name=name, queue=queue,
               pushed_at=pushed_at)
    return rows.filter(Q(claim_token=f"{job_id}:{token}") | legacy).exists()


def marked_claims(rows: Any) -> Iterator[list[Any]]:
    """(job id, token) pairs, flattened and chunked for the DELETE script, of the
    claims these failed rows were written under."""
    tokens: Iterable[str | None] = rows.values_list("claim_token", flat=True)
    pairs: list[Any] = []
    for value in tokens:
        job_id, _, token = (value or "").partition(":")
        if job_id.isdigit() and token:
            pairs += [int(job_id), token]
            if len(pairs) >= 2 * _CHUNK:
                yield pairs
                pairs = []
    if pairs:
        yield pairs


def after_removals(store: Any, ids: Iterable[int] | None, handle: Callable[[Any], int]) -> int:
    """Retry or forget (`handle`) the failed rows `ids` (None: all), having first
    removed from Redis every job still held under one of their claims, in the same
    database transaction (the rows locked).

    Such a job is left by a worker that died after writing its row: once the row
    is gone, the sweep would find no row and give the job back. Removing it first
    means a row never disappears before its job has.
    """
    ids = None if ids is None else list(ids)
    with transaction.atomic(using=store.database):
        for pairs in marked_claims(store._failed_rows(ids).select_for_update()):
            store._run("delete", pairs)
        crash_point("failed.after_removals")  # dies: the rows stay, their jobs gone
        return handle(ids)
