"""What the Redis store reads back for the commands, the admin and the metrics: the
queues it knows, the jobs per queue and state, the running jobs, the per-minute counts,
the oldest waiting job of each queue, and where given jobs are (a mixin of RedisStore)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from django.utils import timezone

from ...core.minutes import Minute
from ...core.values import QueueCounts, Running, job_ids
from ..errors import guarded
from . import minutes as redis_minutes
from . import progress as redis_progress
from .values import EPOCH, text, us

if TYPE_CHECKING:
    from redis import Redis

__all__ = ["RedisReads"]


class RedisReads:
    """RedisStore's queues, counts, running, minutes, oldest_waiting and job_states."""

    if TYPE_CHECKING:  # the store's own
        @property
        def client(self) -> Redis: ...
        def key(self, *parts: str) -> str: ...
        def _with_failed(self, counts: dict[str, QueueCounts]) -> dict[str, QueueCounts]: ...
        def _failed_states(self, ids: Sequence[int]) -> dict[int, str]: ...

    @guarded
    def queues(self) -> list[str]:
        """Return the names of the queues that ever held a job, sorted."""
        return sorted(text(q) for q in self.client.smembers(self.key("queues")))

    @guarded
    def counts(self) -> dict[str, QueueCounts]:
        now = us(timezone.now())
        names = self.queues()
        pipe = self.client.pipeline(transaction=True)
        for queue in names:
            pipe.zcard(self.key("queue", queue, "ready"))
            pipe.zcount(self.key("queue", queue, "delayed"), "-inf", now)
            pipe.zcount(self.key("queue", queue, "delayed"), f"({now}", "+inf")
            pipe.zcard(self.key("queue", queue, "claimed"))
        values = pipe.execute() if names else []
        result: dict[str, QueueCounts] = {}
        for index, queue in enumerate(names):
            ready, due, later, claimed = values[index * 4 : index * 4 + 4]
            result[queue] = QueueCounts(waiting=ready + due, delayed=later, running=claimed)
        return self._with_failed(result)

    @guarded
    def job_states(self, ids: Iterable[int]) -> dict[int, str]:
        wanted = job_ids(ids)
        now = us(timezone.now())
        pipe = self.client.pipeline(transaction=False)
        for job_id in wanted:
            pipe.hmget(self.key("job", str(job_id)), "token", "available_at", "name")
        states = {}
        for job_id, (token, available_at, name) in zip(
                wanted, pipe.execute() if wanted else [], strict=True):
            if name is not None:
                states[job_id] = ("running" if token is not None else
                                  "delayed" if int(available_at or 0) > now else "waiting")
        # A job being moved to the failed list may be in both for a moment: failed wins.
        states.update(self._failed_states(wanted))
        return states

    @guarded
    def running(self, limit: int = 100) -> list[Running]:
        return redis_progress.running(self, limit)  # type: ignore[arg-type]

    @guarded
    def minutes(self, since: datetime) -> list[Minute]:
        return redis_minutes.read(self, since)  # type: ignore[arg-type]

    @guarded
    def oldest_waiting(self) -> dict[str, datetime]:
        """See Store.oldest_waiting. A ready set is ordered by priority, then by due time:
        its first member is the oldest of its priority; with several priorities, the
        first member of each is read (a few round trips, as priorities are few)."""
        now = us(timezone.now())
        names = self.queues()
        pipe = self.client.pipeline(transaction=False)
        for queue in names:
            ready = self.key("queue", queue, "ready")
            pipe.zrange(ready, 0, 0, withscores=True)
            pipe.zrange(ready, -1, -1, withscores=True)
            pipe.zrangebyscore(self.key("queue", queue, "delayed"), "-inf", now, 0, 1,
                               withscores=True)
        values = pipe.execute() if names else []
        result: dict[str, datetime] = {}
        for index, queue in enumerate(names):
            first, last, due = values[index * 3 : index * 3 + 3]
            moments = [int(score) for _, score in due]
            if first:
                moments.append(_due_of(first[0][0]))
                if first[0][1] != last[0][1]:
                    moments += self._oldest_per_priority(queue, first[0][1], last[0][1])
            if moments:
                result[queue] = EPOCH + timedelta(microseconds=min(moments))
        return result

    def _oldest_per_priority(self, queue: str, low: float, high: float) -> list[int]:
        """The due time of the first ready member of each priority above `low`."""
        ready = self.key("queue", queue, "ready")
        found: list[int] = []
        score = f"({low}"
        while True:
            entries: Any = self.client.zrangebyscore(ready, score, high, 0, 1, withscores=True)
            if not entries:
                return found
            member, at = entries[0]
            found.append(_due_of(member))
            score = f"({at}"


def _due_of(member: bytes | str) -> int:
    """The due time (microseconds) in a ready set's member "<available_at>:<id>"."""
    return int(text(member).split(":", 1)[0])
