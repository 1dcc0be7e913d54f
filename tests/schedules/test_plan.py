"""What a scheduler fires at a given moment: due ticks, and the `missed` rules."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from laterite_django.schedules.definition import MISSED_LIMIT, Schedule
from laterite_django.schedules.plan import Step, plan

NOW = datetime(2026, 6, 1, 12, 0, 0, 500000, tzinfo=UTC)


def every(seconds: float, missed: str = "skip") -> Schedule:
    return Schedule("s", "tests.noop", every=timedelta(seconds=seconds), missed=missed)


def at(seconds: float) -> datetime:
    return NOW.replace(microsecond=0) + timedelta(seconds=seconds)


def test_nothing_due():
    assert plan(every(10), at(0), NOW) == []


def test_due_ticks_fire_in_order():
    assert plan(every(1), at(-3), NOW) == [Step(at(-2), True), Step(at(-1), True),
                                           Step(at(0), True)]


def test_ticks_less_than_a_minute_late_all_fire():
    # Every scheduler stopped for 50 s (a deploy): they catch up, whatever `missed` says.
    steps = plan(every(5, "skip"), at(-50), NOW)
    assert steps == [Step(at(-n), True) for n in range(45, -1, -5)]


def test_a_daily_tick_straddled_by_a_restart_still_fires():
    daily = Schedule("d", "tests.noop", cron="0 12 * * *")
    assert plan(daily, at(-86400), NOW + timedelta(seconds=40)) == [Step(at(0), True)]


def test_missed_skip_fires_only_the_current_tick():
    # Stopped for 20 minutes with a 2 s schedule: no burst of catch-up jobs.
    assert plan(every(2, "skip"), at(-1200), NOW) == [Step(at(0), True)]


def test_missed_skip_passes_over_ticks_none_of_which_is_current():
    steps = plan(every(3600, "skip"), at(-5 * 3600), NOW + timedelta(minutes=30))
    assert steps == [Step(at(0), False)]


def test_missed_latest_fires_the_newest_tick_once_however_late():
    steps = plan(every(3600, "latest"), at(-5 * 3600), NOW + timedelta(minutes=30))
    assert steps == [Step(at(0), True)]


def test_missed_all_fires_each_oldest_first():
    steps = plan(every(3600, "all"), at(-5 * 3600), NOW + timedelta(minutes=30))
    assert steps == [Step(at(-h * 3600), True) for h in (4, 3, 2, 1, 0)]


def test_missed_all_is_capped_to_the_newest():
    steps = plan(every(60, "all"), NOW - timedelta(days=30), NOW)
    fired = [s.tick for s in steps]
    assert all(s.fire for s in steps)
    assert len(fired) == MISSED_LIMIT and fired == sorted(fired)
    assert fired[-1] == at(0) and fired[0] == at(-60 * (MISSED_LIMIT - 1))


def test_missed_limit_is_the_schedule_s_own():
    limited = Schedule("s", "tests.noop", every=timedelta(seconds=60), missed="all",
                       missed_limit=2)
    assert plan(limited, NOW - timedelta(days=1), NOW) == [Step(at(-60), True),
                                                            Step(at(0), True)]


@pytest.mark.parametrize("limit", [0, -1, True, 2.5, 1001])
def test_a_bad_missed_limit_is_refused_where_it_is_used(limit):
    bad = Schedule("s", "tests.noop", every=timedelta(seconds=60), missed="all",
                   missed_limit=limit)
    with pytest.raises(ValueError, match="Schedule 's': missed_limit"):
        plan(bad, NOW - timedelta(days=1), NOW)


def test_a_cursor_ahead_of_the_clock_fires_nothing():
    assert plan(every(1), NOW + timedelta(seconds=5), NOW) == []

