"""What a scheduler does for one schedule at one moment: the ticks to fire, in order.

Pure (no store, no clock of its own), so the calendar cases are tested with any `now`.

While the oldest tick not yet fired is less than MISSED_AFTER late, every due
tick fires, oldest first: a scheduler that was slow for a few seconds (or
restarted during a deploy) catches up. Once it is later than that, no
scheduler ran for a while and ticks were *missed*; the schedule's `missed`
says what becomes of them:

- "skip": only the latest due tick fires, if it is less than MISSED_AFTER
  late (the current one); the others are passed over.
- "latest": the latest due tick fires, however late; the others are passed over.
- "all": each fires, oldest first, at most `missed_limit` of them (the newest).

Ticks fire in order and the store's cursor only moves forward, so however many
schedulers run the same plan, each tick fires once.
"""

from __future__ import annotations

from datetime import datetime
from typing import NamedTuple

from .definition import MISSED_AFTER, Schedule, missed_limit_problem

__all__ = ["Step", "plan"]


class Step(NamedTuple):
    """Move the cursor to `tick`, and push a job for it if `fire`."""

    tick: datetime
    fire: bool


def plan(schedule: Schedule, cursor: datetime, now: datetime) -> list[Step]:
    """The steps that bring `schedule` from `cursor` (ticks at or before it are done)
    up to `now`; empty when no tick is due."""
    ticks = schedule.ticks
    first = ticks.next_after(cursor)
    if first is None or first > now:
        return []
    if now - first <= MISSED_AFTER:
        steps = []
        tick: datetime | None = first
        while tick is not None and tick <= now:
            steps.append(Step(tick, True))
            tick = ticks.next_after(tick)
        return steps
    if schedule.missed == "all":
        # Checked again here: a Schedule built in code has not been through the check.
        problem = missed_limit_problem(schedule.missed_limit)
        if problem:
            raise ValueError(f"Schedule {schedule.name!r}: {problem}.")
        return [Step(tick, True) for tick in ticks.latest(now, cursor, schedule.missed_limit)]
    (latest,) = ticks.latest(now, cursor, 1)
    fire = schedule.missed == "latest" or now - latest <= MISSED_AFTER
    return [Step(latest, fire)]
