"""What a running job can know about itself, and what a push returns."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

__all__ = ["JobContext", "Pushed"]


@dataclass(frozen=True, slots=True)
class JobContext:
    """Handed to a job function that declares a `cx` parameter."""

    id: int | str | None  # None when the job ran inline
    name: str
    queue: str
    attempt: int  # from 1
    pushed_at: datetime
    schedule: str | None = None  # the schedule that pushed it, if one did
    scheduled_at: datetime | None = None  # the tick it was pushed for (--run: that moment)
    # Where `progress` goes (the worker's ProgressDesk); None: nowhere (inline, run_jobs).
    report_progress: Callable[[object], None] | None = field(
        default=None, repr=False, compare=False)

    def progress(self, done: float, total: float | None = None, note: str = "") -> None:
        """Say how far the job is: `done` of `total` (None if not known), with a short
        note. Cheap: the worker's heartbeat thread stores the latest value at most once a
        second; the admin and `queue_status` show it while the job runs."""
        from .progress import check

        reported = check(done, total, note)
        if self.report_progress is not None:
            self.report_progress(reported)


@dataclass(frozen=True, slots=True)
class Pushed:
    """The outcome of one push: queued (with its id), ran inline, or a duplicate dropped."""

    status: Literal["queued", "ran", "duplicate"]
    id: int | str | None = None
    result: object = None  # the return value of an inline run

    @property
    def queued(self) -> bool:
        return self.status == "queued"
