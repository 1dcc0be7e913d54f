"""What `queue_schedules` and the admin show and do with the schedules, through the store.

Listing, pausing, resuming and running one now are here once, so the command and
the admin say and do the same.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.utils import timezone

from ..stores import Store, get_store
from ..stores.schedule_state import Fired, ScheduleFire, ScheduleState
from .definition import Schedule, find, schedules
from .scheduler import new_job

__all__ = ["ScheduleRow", "listing", "pause", "resume", "run_now"]


@dataclass(frozen=True)
class ScheduleRow:
    """One schedule as listed: its definition, its state in the store, its next ticks."""

    schedule: Schedule
    state: ScheduleState | None  # None: no scheduler has seen it yet
    next_ticks: list[datetime]
    # Its last job now: waiting, delayed, running, failed, or done (no longer anywhere:
    # it succeeded, or was deleted); None if it pushed none yet.
    last_outcome: str | None = None

    @property
    def name(self) -> str:
        return self.schedule.name

    @property
    def paused(self) -> bool:
        return self.state is not None and self.state.paused

    @property
    def last_fired(self) -> datetime | None:
        return self.state.fired_at if self.state is not None else None

    @property
    def last_job_id(self) -> int | None:
        return self.state.job_id if self.state is not None else None

    def as_dict(self) -> dict:
        s = self.schedule
        return {
            "name": s.name, "job": s.target, "rule": s.rule, "timezone": str(s.timezone),
            "queue": s.queue, "missed": s.missed, "overlap": s.overlap,
            "next": [tick.isoformat() for tick in self.next_ticks],
            "last": self.last_fired.isoformat() if self.last_fired else None,
            "last_job_id": self.last_job_id, "last_outcome": self.last_outcome,
            "paused": self.paused,
        }


def listing(store: Store | None = None, now: datetime | None = None) -> list[ScheduleRow]:
    """Every configured schedule with its state and next three ticks (none while paused)."""
    store = store or get_store()
    now = now or timezone.now()
    configured = schedules()
    states = store.schedule_states([s.name for s in configured])
    last_jobs = [state.job_id for state in states.values() if state.job_id is not None]
    outcomes = store.job_states(last_jobs) if last_jobs else {}
    rows = []
    for schedule in configured:
        state = states.get(schedule.name)
        after = max(now, state.last_tick) if state and state.last_tick else now
        upcoming = [] if state and state.paused else schedule.next_ticks(after, 3)
        outcome = None
        if state is not None and state.job_id is not None:
            outcome = outcomes.get(state.job_id, "done")
        rows.append(ScheduleRow(schedule, state, upcoming, outcome))
    return rows


def pause(name: str, store: Store | None = None) -> ScheduleState:
    """Pause schedule `name`: no scheduler fires its ticks until it is resumed."""
    return (store or get_store()).pause_schedule(find(name).name, True, timezone.now())


def resume(name: str, store: Store | None = None) -> ScheduleState:
    """Resume schedule `name`; the ticks that passed while it was paused do not fire."""
    return (store or get_store()).pause_schedule(find(name).name, False, timezone.now())


def run_now(name: str, store: Store | None = None) -> Fired:
    """Push schedule `name`'s job now, outside its ticks (paused or not); cx.scheduled_at
    is this moment."""
    schedule = find(name)
    now = timezone.now()
    job = new_job(schedule, now)
    job.pushed_at = now  # the state's fired_at: the moment the job sees as scheduled_at
    return (store or get_store()).fire_schedule(ScheduleFire(schedule.name, None, job))
