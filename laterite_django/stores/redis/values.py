"""How values travel between the Redis store and its Lua scripts.

Times are integer microseconds since the epoch (exact, and comparable inside
Lua); text comes back as bytes; a claimed job comes back as one flat array.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, overload

from ...core.values import Claim, NewJob

__all__ = [
    "AGAIN_WITHIN", "EPOCH", "PUSH_CHUNK", "claim_args", "claims", "debounced_args", "dt",
    "job_fields", "pack", "push_args", "push_packed", "text", "us",
]

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
# Jobs per PUSH script call; a bigger push is several calls in one pipeline.
PUSH_CHUNK = 2000
# How far back (microseconds) a claim sent again, its answer lost, looks for the jobs
# its first run took (a socket's timeout and a reconnect later). Sent later still, it
# claims anew, and those jobs wait for the sweep. Every live claim was refreshed
# within retry_after anyway: a longer look reads no more of them.
AGAIN_WITHIN = 600_000_000
_MICROSECOND = timedelta(microseconds=1)


def us(moment: datetime) -> int:
    """Return an aware datetime as integer microseconds since the epoch (exact)."""
    return max(0, (moment - EPOCH) // _MICROSECOND)


@overload
def dt(value: None) -> None: ...
@overload
def dt(value: bytes | str | int) -> datetime | None: ...
def dt(value: Any) -> datetime | None:
    """Return microseconds since the epoch (as Redis hands them back) as a datetime."""
    if value is None or value == b"" or value == "":
        return None
    return EPOCH + timedelta(microseconds=int(value))


@overload
def text(value: None) -> None: ...
@overload
def text(value: bytes | str) -> str: ...
def text(value: Any) -> str | None:
    """Return bytes from Redis as text."""
    if value is None:
        return None
    return value.decode() if isinstance(value, bytes) else str(value)


def job_fields(job: NewJob) -> tuple[str, ...]:
    """A job's nine values as the push scripts take them, all strings: a due time
    counted from now (NewJob.delay) as '+<microseconds>', which the script adds to the
    server's clock (`due_at` in lua/_common.lua)."""
    delay = job.delay
    return (
        job.name,
        job.queue,
        job.payload,
        str(int(job.priority)),
        str(us(job.pushed_at)),
        str(us(job.available_at)) if delay is None else f"+{round(delay * 1_000_000)}",
        "" if job.retry_until is None else str(us(job.retry_until)),
        "0" if job.unique_key is None else "1",
        job.unique_key or "",
    )


def debounced_args(job: NewJob) -> tuple[str, ...]:
    """PUSH_DEBOUNCED's values of `job` after the prefix and now, up to its mark (see
    lua/push_debounced.lua): times in microseconds, the waits counted from the server's
    now."""
    assert job.debounce is not None and job.unique_key is not None
    return (
        job.name,
        job.queue,
        job.payload,
        str(int(job.priority)),
        str(us(job.pushed_at)),
        str(round(job.debounce * 1_000_000)),
        "" if job.retry_until is None else str(us(job.retry_until)),
        job.unique_key,
        "" if job.debounce_max is None else str(round(job.debounce_max * 1_000_000)),
        job.concurrency_key or "",
        "" if job.concurrency_limit is None else str(job.concurrency_limit),
    )


def pack(values: Iterable[Any]) -> str:
    """Values (strings, or arrays of them) as one JSON array, for a script that decodes
    them with cjson."""
    return _PACK(list(values))


_PACK = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


def push_packed(now: str, jobs: Sequence[NewJob], once: Sequence[str] | None = None
                ) -> list[Any]:
    """The PUSH script's arguments after the prefix, up to its sender's (see
    lua/push.lua); `once`: a mark per job, so that a push made again
    (the outbox's) stores it only once."""
    if len(jobs) == 1:
        packed = pack(job_fields(jobs[0]))  # the common push, without a generator
    else:
        packed = pack(value for job in jobs for value in job_fields(job))
    return [now, packed, "" if once is None else pack(once)]


def push_args(now: str, jobs: Sequence[NewJob]) -> list[Any]:
    """The arguments of a script that takes a job's values one by one (the schedules'
    FIRE), after the prefix: now, the number of jobs, nine values per job."""
    args: list[Any] = [now, len(jobs)]
    for job in jobs:
        args += job_fields(job)
    return args


def claim_args(token: str, queues: Sequence[str], worker: str, limit: int) -> list[Any]:
    """The CLAIM script's arguments after the prefix: how far back a claim sent again
    looks (AGAIN_WITHIN), its token, the worker, how many jobs, not sent again ('0'),
    the queues (see lua/_claim.lua)."""
    return [AGAIN_WITHIN, token, worker, int(limit), "0", *queues]


def claims(rows: Sequence[Sequence[Any]], token: str) -> list[Claim]:
    """The claims of the CLAIM script's rows (see lua/_claim.lua), in its order."""
    return [
        Claim(
            id=int(row[0]),
            attempts=int(row[1]),
            name=text(row[2]),
            queue=text(row[3]),
            payload=text(row[4]),
            pushed_at=dt(row[5]),
            retry_until=dt(row[6]),
            unique_key=text(row[7]),
            priority=int(row[8] or 0),
            last_error=text(row[9]) or "",
            available_at=dt(row[10]),
            position=int(row[11]),
            uncounted=int(row[12] or 0),
            cancel_requested=row[13] is not None,
            token=token,
        )
        for row in rows
    ]
