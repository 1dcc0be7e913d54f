"""The database store's schedule state: the `laterite_schedule` table (ScheduleRecord).

Firing a tick is one transaction: a compare-and-set that moves the schedule's
cursor forward to the tick (`UPDATE ... WHERE last_tick < tick`), then the
push of its job, then the record of that job. On PostgreSQL a second scheduler's
UPDATE waits on the row lock and, once the first commits, finds the cursor at
the tick and changes nothing; SQLite serializes the transactions (IMMEDIATE).
A scheduler that dies mid-transaction leaves it rolled back: neither the cursor
nor the job moved, and the next scheduler fires the tick.

A schedule whose rule changed (`rule_hash`) restarts with a compare-and-set of
that column, which moves the cursor forward to the moment of the change.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from django.db import transaction
from django.db.models import Q

from ..crash_points import crash_point
from .schedule_state import REMOVED, Fired, ScheduleFire, ScheduleState

if TYPE_CHECKING:
    from .database import DatabaseStore

__all__ = ["add", "define", "fire", "pause", "remove", "states"]


def _rows(store: DatabaseStore):
    from ..models import ScheduleRecord

    return ScheduleRecord._default_manager.using(store.database)


def _state(row) -> ScheduleState:
    return ScheduleState(name=row.name, last_tick=row.last_tick, fired_at=row.fired_at,
                         job_id=row.job_id, paused=row.paused,
                         rule_hash=row.rule_hash or None)


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


def define(store: DatabaseStore, rules: Mapping[str, str], now: datetime) -> list[str]:
    rows = _rows(store)
    restarted = []
    kept = rows.filter(name__in=list(rules)).values_list("name", "rule_hash")
    for name, kept_hash in [(n, h) for n, h in kept if h != rules[n]]:
        with transaction.atomic(using=store.database):
            # The compare-and-set: a scheduler that raced this one finds the new rule.
            changed = rows.filter(name=name, rule_hash=kept_hash).update(rule_hash=rules[name])
            if not changed or not kept_hash:  # none kept (an older version's): adopted
                continue
            rows.filter(Q(name=name) & (Q(last_tick__isnull=True) | Q(last_tick__lt=now))
                        ).update(last_tick=now)
            restarted.append(name)
    return restarted


def remove(store: DatabaseStore, keep: Sequence[str]) -> int:
    gone = _rows(store).exclude(name__in=list(keep)).exclude(rule_hash=REMOVED)
    if not gone.exists():  # read first: most starts find nothing gone, and write nothing
        return 0
    return gone.update(rule_hash=REMOVED)


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
