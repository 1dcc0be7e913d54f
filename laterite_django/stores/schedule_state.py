"""What a store keeps per schedule, and the one atomic step that fires a tick.

A schedule's state is its cursor (`last_tick`: every tick at or before it was
dealt with, fired or passed over), the moment and id of its last job, and
whether it is paused, and the digest of the rule it was kept for (`rule_hash`:
when the configured rule's differs, the schedule starts over from that moment,
see `Store.define_schedules`). `Store.fire_schedule` moves the cursor forward only, and
pushes the tick's job in the same atomic step (one transaction on the
database, one Lua script on Redis): however many schedulers try the same
tick, one moves the cursor past it and pushes its job, and the others find the
cursor already there. A scheduler that dies mid-step leaves nothing half done.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from ..core.values import NewJob

__all__ = ["REMOVED", "Fired", "ScheduleFire", "ScheduleState"]

# The rule_hash of a schedule taken out of the settings: if it comes back, its rule differs.
REMOVED = "removed"


@dataclass(frozen=True, slots=True)
class ScheduleState:
    """One schedule's state in the store."""

    name: str
    last_tick: datetime | None  # the cursor: ticks at or before it are done with
    fired_at: datetime | None = None  # the tick (or --run moment) of its last job
    job_id: int | None = None  # that job's id
    paused: bool = False
    rule_hash: str | None = None  # None: kept by a version that kept no rule


@dataclass(frozen=True, slots=True)
class ScheduleFire:
    """One step of a scheduler on one schedule.

    - `tick` and `job`: move the cursor to `tick` if it is before it and the
      schedule is not paused, and push `job`; with `skip_if_running`, push
      nothing while the schedule's previous job still waits or runs.
    - `tick` without `job`: only move the cursor (ticks passed over as missed).
    - `job` without `tick`: push now, outside the ticks (`queue_schedules --run`),
      paused or not; the cursor stays.
    """

    name: str
    tick: datetime | None
    job: NewJob | None
    skip_if_running: bool = False


@dataclass(frozen=True, slots=True)
class Fired:
    """What a ScheduleFire did: `pushed` (job `id`), `advanced` (the cursor only),
    `overlap` (the cursor moved, the previous job still runs), `lost` (another
    scheduler had moved the cursor to or past the tick) or `paused`."""

    outcome: Literal["pushed", "advanced", "overlap", "lost", "paused"]
    id: int | str | None = None
