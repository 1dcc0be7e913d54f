"""When a schedule's ticks fall: a cron expression read in a zone, or an interval.

Cron expressions are parsed and walked by cronsim, which follows Debian's cron,
daylight saving time included: a job at a fixed local time (minute and hour
both fixed, or a granularity over an hour) that a spring-forward skips runs at
the first minute after the gap, and one that a fall-back repeats runs at its
first pass only. So a daily job at a local time runs once that day, whatever
the clock does. Expressions with a `*` in the minute or hour field follow the
real clock: an hourly job runs each real hour.

An interval's ticks are the whole multiples of it since the Unix epoch (UTC),
so every scheduler on every host agrees on them without talking.

Every moment given and returned here is an aware datetime; ticks come back in UTC.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

__all__ = ["ALIASES", "CronTicks", "EveryTicks", "Ticks", "cron_problem", "expand_alias"]

# The usual aliases, as 5-field expressions (cronsim reads fields, not aliases).
ALIASES = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)


def expand_alias(expression: str) -> str:
    """The 5-field expression for an alias (`@daily`), or the expression itself."""
    return ALIASES.get(expression.strip().lower(), expression.strip())


def cron_problem(expression: object) -> str | None:
    """Say what is wrong with a cron expression, or return None."""
    if not isinstance(expression, str) or not expression.strip():
        return "cron must be a non-empty string"
    fields = expand_alias(expression).split()
    if len(fields) != 5:
        return (f"cron {expression!r} has {len(fields)} fields; it needs 5 (minute hour "
                f"day-of-month month day-of-week) or an alias ({', '.join(ALIASES)})")
    try:
        from cronsim import CronSim, CronSimError
    except ImportError:
        return "cron rules need cronsim (the 'schedules' extra), or use every"
    try:
        CronSim(" ".join(fields), datetime(2000, 1, 1))
    except CronSimError as e:
        return f"cron {expression!r} is not valid: {e}"
    return None


class Ticks:
    """The ticks of one rule."""

    def next_after(self, moment: datetime) -> datetime | None:
        """The first tick strictly after `moment`; None if there is none (cron's 50-year
        horizon)."""
        raise NotImplementedError

    def latest(self, moment: datetime, after: datetime, limit: int) -> list[datetime]:
        """The newest `limit` ticks in (`after`, `moment`], oldest first."""
        raise NotImplementedError


class EveryTicks(Ticks):
    """Every `period`, at whole multiples of it since the epoch."""

    def __init__(self, period: timedelta) -> None:
        self.period_us = period // _MICROSECOND
        if self.period_us <= 0:
            raise ValueError(f"An interval must be positive, got {period!r}.")

    def _us(self, moment: datetime) -> int:
        return (moment - _EPOCH) // _MICROSECOND

    def _at(self, count: int) -> datetime:
        return _EPOCH + timedelta(microseconds=count * self.period_us)

    def next_after(self, moment: datetime) -> datetime:
        return self._at(self._us(moment) // self.period_us + 1)

    def latest(self, moment: datetime, after: datetime, limit: int) -> list[datetime]:
        last = self._us(moment) // self.period_us
        first = max(self._us(after) // self.period_us + 1, last - limit + 1)
        return [self._at(n) for n in range(first, last + 1)]


class CronTicks(Ticks):
    """A 5-field cron expression (or alias) read in `zone`."""

    def __init__(self, expression: str, zone: ZoneInfo) -> None:
        problem = cron_problem(expression)
        if problem:
            raise ValueError(problem)
        self.expression = expand_alias(expression)
        self.zone = zone

    def next_after(self, moment: datetime) -> datetime | None:
        from cronsim import CronSim

        after = moment.astimezone(UTC)
        walk = CronSim(self.expression, moment.astimezone(self.zone))
        for _ in range(4):  # a fall-back's second pass may map back before `moment`
            try:
                tick = next(walk).astimezone(UTC)
            except StopIteration:
                return None
            if tick > after:
                return tick
        return None

    def latest(self, moment: datetime, after: datetime, limit: int) -> list[datetime]:
        from cronsim import CronSim

        # A microsecond past `moment`: cronsim's reverse walk then includes `moment`.
        walk = CronSim(self.expression, (moment + _MICROSECOND).astimezone(self.zone),
                       reverse=True)
        until, after = moment.astimezone(UTC), after.astimezone(UTC)
        found: list[datetime] = []
        while len(found) < limit:
            try:
                tick = next(walk).astimezone(UTC)
            except StopIteration:
                break
            if tick <= after:
                break
            if tick <= until and (not found or tick < found[-1]):
                found.append(tick)
        return found[::-1]
