"""What a scheduler fires at a given moment: on-time ticks, and the `missed` rules."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from laterite_django.schedules.definition import ALL_CAP, MISSED_AFTER, Schedule
from laterite_django.schedules.plan import Step, plan

NOW = datetime(2026, 6, 1, 12, 0, 0, 500000, tzinfo=UTC)


def every(seconds: float, missed: str = "skip") -> Schedule:
    return Schedule("s", "tests.noop", every=timedelta(seconds=seconds), missed=missed)


def at(seconds: float) -> datetime:
    return NOW.replace(microsecond=0) + timedelta(seconds=seconds)


def test_nothing_due():
    assert plan(every(10), at(0), NOW) == []


def test_on_time_ticks_fire_in_order():
    assert plan(every(1), at(-3), NOW) == [Step(at(-2), True), Step(at(-1), True),
                                           Step(at(0), True)]


def test_a_tick_late_but_within_the_missed_line_still_fires():
    late = MISSED_AFTER.total_seconds() - 5
    assert plan(every(3600), at(-1800), NOW + timedelta(seconds=late)) == [Step(at(0), True)]


def test_missed_skip_moves_past_without_firing():
    cursor = NOW - timedelta(hours=5)
    steps = plan(every(3600, "skip"), cursor, NOW)
    # 07:00 to 11:00 were missed; 12:00, half a second ago, is on time.
    assert steps == [Step(NOW - MISSED_AFTER, False), Step(at(0), True)]


def test_missed_latest_fires_the_newest_missed_tick_once():
    cursor = NOW - timedelta(hours=5)
    steps = plan(every(3600, "latest"), cursor, NOW)
    assert steps == [Step(at(-3600), True), Step(at(0), True)]


def test_missed_all_fires_each_oldest_first():
    cursor = at(-5 * 3600)
    steps = plan(every(3600, "all"), cursor, NOW)
    assert steps == [Step(at(-h * 3600), True) for h in (4, 3, 2, 1, 0)]


def test_missed_all_is_capped_to_the_newest():
    cursor = NOW - timedelta(days=30)
    steps = plan(every(60, "all"), cursor, NOW)
    fired = [s.tick for s in steps]
    assert len(fired) == ALL_CAP + 1  # the cap of missed ticks, then this minute's
    assert fired == sorted(fired)
    assert fired[ALL_CAP - 1] <= NOW - MISSED_AFTER < fired[ALL_CAP]


def test_missed_then_on_time():
    # Down for 3 minutes with a 1 s schedule: the last minute's ticks are on time.
    steps = plan(every(1, "skip"), NOW - timedelta(minutes=3), NOW)
    assert steps[0] == Step(NOW - MISSED_AFTER, False)
    assert all(s.fire for s in steps[1:])
    assert len(steps) - 1 == MISSED_AFTER.total_seconds()


def test_a_cursor_ahead_of_the_clock_fires_nothing():
    assert plan(every(1), NOW + timedelta(seconds=5), NOW) == []
