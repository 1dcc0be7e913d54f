"""What a scheduler does for one schedule at one moment: the ticks to fire, in order.

Pure (no store, no clock of its own), so the calendar cases are tested with any `now`.

A tick is on time until MISSED_AFTER has passed since it; one that no scheduler
fired by then was missed (every scheduler was stopped, or stuck), and the
schedule's `missed` says what becomes of those:

- "skip": none fires; the cursor moves past them.
- "latest": the newest fires once, late; the older ones are skipped.
- "all": each fires, oldest first, at most ALL_CAP of them (the newest); the
  older ones are skipped.

Ticks fire in order and the store's cursor only moves forward, so however many
schedulers run the same plan, each tick fires once.
"""

from __future__ import annotations

from datetime import datetime
from typing import NamedTuple

from .definition import ALL_CAP, MISSED_AFTER, Schedule

__all__ = ["Step", "plan"]


class Step(NamedTuple):
    """Move the cursor to `tick`, and push a job for it if `fire`."""

    tick: datetime
    fire: bool


def plan(schedule: Schedule, cursor: datetime, now: datetime) -> list[Step]:
    """The steps that bring `schedule` from `cursor` (ticks at or before it are done)
    up to `now`; empty when no tick is due."""
    ticks = schedule.ticks
    steps: list[Step] = []
    late = now - MISSED_AFTER
    start = cursor
    if cursor < late:
        first = ticks.next_after(cursor)
        if first is not None and first <= late:
            if schedule.missed == "skip":
                steps.append(Step(late, False))
            else:
                limit = 1 if schedule.missed == "latest" else ALL_CAP
                steps += [Step(tick, True) for tick in ticks.latest(late, cursor, limit)]
        start = late
    tick = ticks.next_after(start)
    while tick is not None and tick <= now:
        steps.append(Step(tick, True))
        tick = ticks.next_after(tick)
    return steps
