"""What a running job can know about itself, and what a push returns."""

from __future__ import annotations

from dataclasses import dataclass
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


@dataclass(frozen=True, slots=True)
class Pushed:
    """The outcome of one push: queued (with its id), ran inline, or a duplicate dropped."""

    status: Literal["queued", "ran", "duplicate"]
    id: int | str | None = None
    result: object = None  # the return value of an inline run

    @property
    def queued(self) -> bool:
        return self.status == "queued"
