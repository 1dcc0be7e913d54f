"""The admin's Jobs list on the Redis store: the jobs that wait, wait for later and run
there, read from each queue's sets (`JobBrowser`, owned by RedisStore).

Redis has no index to search by name or argument, so the list reads a bounded window:
of each queue's ready, delayed and claimed sets the members first in line (the next
to be claimed, the soonest due, the longest claimed), at most `window` jobs in all
shared among the sets asked for, and their hashes in pipelined chunks. The admin then
filters those jobs and says when the window left jobs unread.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from django.utils import timezone

from .values import dt, text, us

if TYPE_CHECKING:
    from redis import Redis

__all__ = ["WINDOW", "Browsed", "JobBrowser", "ListedJob"]

# The most jobs one page of the admin's list reads from Redis.
WINDOW = 10_000
# Hashes read per pipeline.
CHUNK = 1_000
_FIELDS = ("name", "queue", "payload", "priority", "attempts", "pushed_at", "available_at",
           "claimed_by", "claimed_at", "token")
STATES = ("waiting", "delayed", "running")


@dataclass(frozen=True, slots=True)
class ListedJob:
    """A job waiting, delayed or running in Redis, as the admin lists it."""

    id: int
    name: str
    queue: str
    state: str  # waiting, delayed or running
    attempts: int
    priority: int
    payload: str
    pushed_at: datetime | None
    available_at: datetime | None
    claimed_by: str = ""
    claimed_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class Browsed:
    """The jobs read, and how many the sets asked for hold in all (more than read:
    the window was full)."""

    jobs: list[ListedJob]
    total: int

    @property
    def window_full(self) -> bool:
        return self.total > len(self.jobs)


class JobBrowser:
    """Reads the window of jobs the admin's list shows (see the module's docstring)."""

    def __init__(self, prefix: str, client: Callable[[], Redis],
                 queues: Callable[[], list[str]]) -> None:
        self.prefix = prefix
        self._client = client  # the store's client, connected on first use
        self._queues = queues  # the queues that ever held a job

    def browse(self, queues: Sequence[str] | None = None,
               states: Sequence[str] = STATES, window: int = WINDOW) -> Browsed:
        """The jobs of `queues` (None: every queue) in `states`, at most `window`."""
        names = list(queues) if queues is not None else self._queues()
        # Waiting jobs are in the ready set, and in the delayed set once due (until a
        # claim moves them): the delayed set is read for either state.
        sets = [(queue, kind) for queue in names
                for kind in ("ready", "delayed", "claimed")
                if (kind == "ready" and "waiting" in states)
                or (kind == "delayed" and ("waiting" in states or "delayed" in states))
                or (kind == "claimed" and "running" in states)]
        if not sets:
            return Browsed([], 0)
        client = self._client()
        pipe = client.pipeline(transaction=False)
        for queue, kind in sets:
            pipe.zcard(f"{self.prefix}:queue:{queue}:{kind}")
        sizes = pipe.execute()
        shares = _shares(sizes, window)
        read = [(queue, kind, share)
                for (queue, kind), share in zip(sets, shares, strict=True) if share]
        pipe = client.pipeline(transaction=False)
        for queue, kind, share in read:
            pipe.zrange(f"{self.prefix}:queue:{queue}:{kind}", 0, share - 1)
        # A ready member is "<available_at>:<id>"; the others are the id.
        ids = [int(text(member).rsplit(":", 1)[-1])
               for members in (pipe.execute() if read else []) for member in members]
        now = us(timezone.now())
        jobs: list[ListedJob] = []
        for start in range(0, len(ids), CHUNK):
            chunk = ids[start:start + CHUNK]
            pipe = client.pipeline(transaction=False)
            for job_id in chunk:
                pipe.hmget(f"{self.prefix}:job:{job_id}", _FIELDS)
            for job_id, row in zip(chunk, pipe.execute(), strict=True):
                listed = _listed(job_id, row, now)
                if listed is not None and listed.state in states:
                    jobs.append(listed)
        total = sum(sizes)
        # Jobs read and then left out by state (a due delayed job when only delayed
        # ones are asked for) count as read.
        return Browsed(jobs, total if total > len(ids) else len(jobs))


def _shares(sizes: Sequence[int], window: int) -> list[int]:
    """How many members to read of each set: all of each while they fit in `window`,
    else an equal share each, what a small set leaves going to the bigger ones."""
    shares = [0] * len(sizes)
    left = window
    pending = sorted(range(len(sizes)), key=lambda index: sizes[index])
    while pending:
        each = left // len(pending)
        index = pending.pop(0)
        shares[index] = min(sizes[index], each)
        left -= shares[index]
    return shares


def _listed(job_id: int, row: Sequence[bytes | None], now: int) -> ListedJob | None:
    (name, queue, payload, priority, attempts, pushed_at, available_at, claimed_by,
     claimed_at, token) = row
    if name is None:
        return None  # settled between the sets' read and its hash's
    if token is not None and text(token) != "":
        state = "running"
    else:
        state = "delayed" if int(available_at or 0) > now else "waiting"
    return ListedJob(
        id=job_id, name=text(name), queue=text(queue or b""), state=state,
        attempts=int(attempts or 0), priority=int(priority or 0),
        payload=text(payload or b""), pushed_at=dt(pushed_at), available_at=dt(available_at),
        claimed_by=text(claimed_by or b""), claimed_at=dt(claimed_at))
