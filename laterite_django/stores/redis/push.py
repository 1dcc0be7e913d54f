"""How the Redis store pushes: one PUSH script per chunk of jobs, one chunk after the
other (a lone job without a unique key by the leaner PUSH_ONE), each sent again if
its answer is lost and stored once all the same (redis_resend), the limited push
for jobs with a concurrency key (redis_limits), the replicated push when
LATERITE_QUEUE_REDIS_WAIT is set (redis_replicated), and the outbox inside a database
transaction (redis_outbox). A mixin of RedisStore."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.utils import timezone

from ...conf import settings
from ...core.values import NewJob
from ..errors import guarded
from . import limits as redis_limits
from . import outbox as redis_outbox
from . import replication as redis_replicated
from . import scripts as calls
from .scripts import ScriptRunner
from .values import PUSH_CHUNK, job_fields, push_packed, us

__all__ = ["RedisPushing"]


class RedisPushing(ScriptRunner):
    """RedisStore's push and push_on_commit."""

    @guarded
    def push(self, jobs: Sequence[NewJob], *, once: Sequence[str] | None = None
             ) -> list[int | None]:
        """Push `jobs`; with `once` (a mark per job), a job whose mark an earlier push
        set is not stored again (the outbox's moves: see redis_outbox)."""
        if not jobs:
            return []
        now = str(us(timezone.now()))
        wait = settings.REDIS_WAIT
        if wait is not None:
            return redis_replicated.push(self, now, jobs, wait, once)  # type: ignore[arg-type]
        if any(job.concurrency_limit for job in jobs):
            # Jobs with a concurrency limit carry its key (redis_limits).
            return [int(i) or None for i in self._push(
                "push_limited", redis_limits.push_limited_args(now, jobs, once))]
        if len(jobs) == 1 and once is None and jobs[0].unique_key is None:
            # The push most code makes, by the lean script (redis_scripts_push_claim).
            return [int(self._push("push_one", (now, *job_fields(jobs[0])[:7]))[0])]
        # One chunk at a time: a chunk sent again (its answer lost) is known by its
        # number as its sender's last push (redis_resend).
        return [int(i) or None for start in range(0, len(jobs), PUSH_CHUNK)
                for i in self._push("push", push_packed(
                    now, jobs[start : start + PUSH_CHUNK],
                    None if once is None else once[start : start + PUSH_CHUNK]))]

    def _push(self, name: str, args: Sequence[Any]) -> Any:
        """Run push script `name` with the prefix and `args` (redis_calls.run_push)."""
        return calls.run_push(self.client, name, [self.prefix, *args])

    @guarded
    def push_on_commit(self, jobs: Sequence[NewJob]) -> None:
        """Keep `jobs` in the database outbox, in the open transaction; they move to
        Redis on commit, or at a worker's sweep if Redis is away (redis_outbox)."""
        redis_outbox.hold(self, jobs)  # type: ignore[arg-type]
