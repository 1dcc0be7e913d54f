"""The database store's schedule state: the `laterite_schedule` table (ScheduleRecord).

Firing a tick is one transaction: a compare-and-set that moves the schedule's
cursor forward to the tick (`UPDATE ... WHERE last_tick < tick`), then the
push of its job, then the record of that job. On PostgreSQL a second scheduler's
UPDATE waits on the row lock and, once the first commits, finds the cursor at
the tick and changes nothing; SQLite serializes the transactions (IMMEDIATE).
A scheduler that dies mid-transaction leaves it rolled back: neither the cursor
nor the job moved, and the next scheduler fires the tick.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from django.db import transaction
from django.db.models import Q

from ..crash_points import crash_point
from .schedule_state import Fired, ScheduleFire, ScheduleState

if TYPE_CHECKING:
    from .database import DatabaseStore

__all__ = ["add", "fire", "pause", "states"]


def _rows(store: DatabaseStore):
    from ..models import ScheduleRecord

    return ScheduleRecord._default_manager.using(store.database)


def _state(row) -> ScheduleState:
    return ScheduleState(name=row.name, last_tick=row.last_tick, fired_at=row.fired_at,
                         job_id=row.job_id, paused=row.paused)


def states(store: DatabaseStore, names: Sequence[str]) -> dict[str, ScheduleState]:
    return {row.name: _state(row) for row in _rows(store).filter(name__in=list(names))}


def add(store: DatabaseStore, names: Sequence[str], since: datetime) -> int:
    from ..models import ScheduleRecord

    rows = _rows(store)
    missing = set(names) - set(rows.filter(name__in=list(names)).values_list("name", flat=True))
    if not missing:
        return 0
    before = rows.filter(name__in=missing).count()
    rows.bulk_create([ScheduleRecord(name=name, last_tick=since) for name in sorted(missing)],
                     ignore_conflicts=True)
    return rows.filter(name__in=missing).count() - before


def fire(store: DatabaseStore, step: ScheduleFire) -> Fired:
    from ..models import Job

    rows = _rows(store)
    with transaction.atomic(using=store.database):
        if step.tick is not None:
            moved = rows.filter(
                Q(name=step.name, paused=False)
                & (Q(last_tick__isnull=True) | Q(last_tick__lt=step.tick))
            ).update(last_tick=step.tick)
            if not moved:
                paused = rows.filter(name=step.name, paused=True).exists()
                return Fired("paused" if paused else "lost")
            if step.job is None:
                return Fired("advanced")
            if step.skip_if_running:
                previous = rows.filter(name=step.name).values_list("job_id", flat=True).first()
                if previous is not None and Job.objects.using(store.database).filter(
                        pk=previous).exists():
                    return Fired("overlap")
        elif step.job is None:
            raise ValueError("A ScheduleFire needs a tick, a job, or both.")
        else:
            add(store, [step.name], step.job.pushed_at)
        assert step.job is not None
        (job_id,) = store.push([step.job])
        crash_point("schedule.fire.after_push")  # dies: rolled back, the tick fires again
        rows.filter(name=step.name).update(
            fired_at=step.tick or step.job.pushed_at, job_id=job_id)
    return Fired("pushed", job_id)


def pause(store: DatabaseStore, name: str, paused: bool, now: datetime) -> ScheduleState:
    rows = _rows(store)
    with transaction.atomic(using=store.database):
        add(store, [name], now)
        rows.filter(name=name).update(paused=paused)
        if not paused:
            # Ticks that passed while it was paused do not fire.
            rows.filter(Q(name=name) & (Q(last_tick__isnull=True) | Q(last_tick__lt=now))
                        ).update(last_tick=now)
        return _state(rows.get(name=name))
