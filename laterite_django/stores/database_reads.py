"""What the database store reads back for the commands, the admin and the metrics: the
jobs per queue and state, the running jobs, the per-minute counts, the oldest waiting
job of each queue, and where given jobs are (a mixin of DatabaseStore)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from django.utils import timezone

from ..minutes import Minute, minute_start
from ..progress import Progress
from . import sql
from .base import QueueCounts, Running, job_ids
from .database_wait import aware
from .errors import guarded

__all__ = ["DatabaseReads"]


class DatabaseReads:
    """DatabaseStore's counts, running, minutes, oldest_waiting and job_states."""

    database: str

    if TYPE_CHECKING:  # the store's own
        def _ts(self, value: datetime | None) -> Any: ...
        def _execute(self, statement: str, params: Sequence[Any], fetch: bool = False
                     ) -> tuple[list, int]: ...
        def _with_failed(self, counts: dict[str, QueueCounts]) -> dict[str, QueueCounts]: ...
        def _failed_states(self, ids: Sequence[int]) -> dict[int, str]: ...

    @guarded
    def counts(self) -> dict[str, QueueCounts]:
        now = self._ts(timezone.now())
        rows, _ = self._execute(sql.COUNTS, [now, now], fetch=True)
        return self._with_failed({
            queue: QueueCounts(waiting=int(p or 0), delayed=int(d or 0), running=int(r or 0))
            for queue, p, d, r in rows
        })

    @guarded
    def running(self, limit: int = 100) -> list[Running]:
        rows, _ = self._execute(sql.RUNNING, [limit], fetch=True)
        return [
            Running(id=id_, name=name, queue=queue, attempts=attempts,
                    claimed_by=claimed_by or "", progress=Progress.parse(progress, token))
            for id_, name, queue, attempts, claimed_by, progress, token in rows
        ]

    @guarded
    def minutes(self, since: datetime) -> list[Minute]:
        rows, _ = self._execute(sql.MINUTES, [self._ts(minute_start(since))], fetch=True)
        return [Minute(queue, aware(minute), int(s), int(f)) for queue, minute, s, f in rows]

    @guarded
    def oldest_waiting(self) -> dict[str, datetime]:
        rows, _ = self._execute(sql.OLDEST_WAITING, [self._ts(timezone.now())], fetch=True)
        return {queue: aware(oldest) for queue, oldest in rows if oldest is not None}

    @guarded
    def job_states(self, ids: Iterable[int]) -> dict[int, str]:
        from ..models import Job

        wanted = job_ids(ids)
        states: dict[int, str] = {}
        now = timezone.now()
        rows = Job.objects.using(self.database).filter(pk__in=wanted)
        for job_id, token, available_at in rows.values_list("id", "token", "available_at"):
            states[job_id] = ("running" if token is not None else
                              "delayed" if available_at > now else "waiting")
        states.update(self._failed_states(wanted))
        return states
