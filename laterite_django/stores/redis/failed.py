"""The Redis store's side of the failed list (which lives in the database): the rows it
writes, and the claims they were written under.

Each row the Redis store writes carries its claim (`claim_token`, "<job id>:<claim
token>"), so a repeated fail() of one claim finds its row instead of writing a second,
and retrying or forgetting a row first finishes the job's removal from Redis if the
worker died before doing it (RedisStore._after_removals): a handled row never brings
its job back.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

from django.db import IntegrityError
from django.db.models import Q
from django.utils import timezone

if TYPE_CHECKING:
    from ...core.values import Claim

__all__ = ["CHUNK", "claim_token", "failed_row", "marked_claims", "row_exists", "write_row"]

# Claims per call of the DELETE script when retry() or forget() finishes removals, and
# retried jobs per call of LINK_RETRIED.
CHUNK = 1000


def claim_token(claim: Claim) -> str:
    """The FailedJob.claim_token of a claim: "<job id>:<token>"."""
    return f"{claim.id}:{claim.token}"


def _fit(field: str, value: str | None, notes: list[str]) -> str | None:
    """Cut `value` to the column's length, saying so in `notes` (with the whole value)."""
    # The models load after the app registry: imported on first use.
    from ...models import FailedJob

    limit = getattr(FailedJob._meta.get_field(field), "max_length", None)
    if value is None or limit is None or len(value) <= limit:
        return value
    notes.append(
        f"The job's {field.replace('_', ' ')} was {value!r} ({len(value)} characters); "
        f"the failed list keeps its first {limit}."
    )
    return value[:limit]


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
    `link` adds the `retried_from_*` fields (see RedisStore._retried_link).

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
            if len(pairs) >= 2 * CHUNK:
                yield pairs
                pairs = []
    if pairs:
        yield pairs
