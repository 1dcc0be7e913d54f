"""When ticks fall: cron in a zone (DST included), aliases, intervals since the epoch."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from laterite_django.schedules.definition import Schedule
from laterite_django.schedules.ticks import CronTicks, EveryTicks, cron_problem

PARIS = ZoneInfo("Europe/Paris")
NEW_YORK = ZoneInfo("America/New_York")


def utc(*parts: int) -> datetime:
    return datetime(*parts, tzinfo=UTC)


def walk(ticks, start: datetime, count: int) -> list[datetime]:
    found, moment = [], start
    for _ in range(count):
        moment = ticks.next_after(moment)
        found.append(moment)
    return found


def test_cron_reads_in_its_zone():
    ticks = CronTicks("0 3 * * *", PARIS)
    assert walk(ticks, utc(2026, 1, 10), 2) == [utc(2026, 1, 10, 2), utc(2026, 1, 11, 2)]
    assert walk(CronTicks("0 3 * * *", NEW_YORK), utc(2026, 1, 10), 1) == [utc(2026, 1, 10, 8)]


def test_next_after_is_strictly_after():
    ticks = CronTicks("*/15 * * * *", ZoneInfo("UTC"))
    assert ticks.next_after(utc(2026, 5, 1, 10, 15)) == utc(2026, 5, 1, 10, 30)
    assert ticks.next_after(utc(2026, 5, 1, 10, 14, 59, 999999)) == utc(2026, 5, 1, 10, 15)


def test_weekdays_and_names():
    ticks = CronTicks("*/30 8-9 * * mon-fri", PARIS)
    # Friday 2026-01-09 09:30 Paris, then Monday 08:00.
    assert walk(ticks, utc(2026, 1, 9, 8, 0), 2) == [utc(2026, 1, 9, 8, 30), utc(2026, 1, 12, 7)]


@pytest.mark.parametrize(("alias", "expected"), [
    ("@hourly", utc(2026, 3, 1, 13)),
    ("@daily", utc(2026, 3, 2)),
    ("@midnight", utc(2026, 3, 2)),
    ("@weekly", utc(2026, 3, 8)),  # Sunday
    ("@monthly", utc(2026, 4, 1)),
    ("@yearly", utc(2027, 1, 1)),
    ("@annually", utc(2027, 1, 1)),
])
def test_aliases(alias, expected):
    assert CronTicks(alias, ZoneInfo("UTC")).next_after(utc(2026, 3, 1, 12, 30)) == expected


def test_spring_forward_runs_a_daily_job_once_that_day():
    # Paris, 2026-03-29: 02:00 becomes 03:00; 02:30 never happens that day.
    ticks = walk(CronTicks("30 2 * * *", PARIS), utc(2026, 3, 27), 4)
    local = [t.astimezone(PARIS).strftime("%m-%d %H:%M") for t in ticks]
    assert local == ["03-27 02:30", "03-28 02:30", "03-29 03:00", "03-30 02:30"]


def test_fall_back_runs_a_daily_job_once_that_day():
    # Paris, 2026-10-25: 03:00 becomes 02:00; 02:30 happens twice that day.
    ticks = walk(CronTicks("30 2 * * *", PARIS), utc(2026, 10, 24), 3)
    assert [t.astimezone(PARIS).strftime("%m-%d %H:%M") for t in ticks] == [
        "10-24 02:30", "10-25 02:30", "10-26 02:30"]
    assert ticks[1] == utc(2026, 10, 25, 0, 30)  # the first 02:30 (summer time)
    # From inside the repeated hour, the next is the next day's.
    assert CronTicks("30 2 * * *", PARIS).next_after(utc(2026, 10, 25, 1, 10)) == utc(
        2026, 10, 26, 1, 30)


def test_an_hourly_job_follows_the_real_clock_across_dst():
    ticks = walk(CronTicks("15 * * * *", PARIS), utc(2026, 10, 24, 23, 30), 4)
    assert ticks == [utc(2026, 10, 25, 0, 15), utc(2026, 10, 25, 1, 15),
                     utc(2026, 10, 25, 2, 15), utc(2026, 10, 25, 3, 15)]


def test_latest_walks_back_oldest_first():
    ticks = CronTicks("0 * * * *", ZoneInfo("UTC"))
    assert ticks.latest(utc(2026, 1, 1, 5), utc(2026, 1, 1, 1), 10) == [
        utc(2026, 1, 1, 2), utc(2026, 1, 1, 3), utc(2026, 1, 1, 4), utc(2026, 1, 1, 5)]
    assert ticks.latest(utc(2026, 1, 1, 5, 30), utc(2026, 1, 1, 1), 2) == [
        utc(2026, 1, 1, 4), utc(2026, 1, 1, 5)]
    assert ticks.latest(utc(2026, 1, 1, 5, 30), utc(2026, 1, 1, 5), 2) == []


def test_every_ticks_at_multiples_since_the_epoch():
    ticks = EveryTicks(timedelta(seconds=30))
    assert ticks.next_after(utc(2026, 1, 1, 0, 0, 10)) == utc(2026, 1, 1, 0, 0, 30)
    assert ticks.next_after(utc(2026, 1, 1, 0, 0, 30)) == utc(2026, 1, 1, 0, 1)
    assert ticks.latest(utc(2026, 1, 1, 0, 2), utc(2026, 1, 1, 0, 0, 30), 10) == [
        utc(2026, 1, 1, 0, 1), utc(2026, 1, 1, 0, 1, 30), utc(2026, 1, 1, 0, 2)]
    assert ticks.latest(utc(2026, 1, 1, 0, 2), utc(2026, 1, 1), 1) == [utc(2026, 1, 1, 0, 2)]
    # Hosts agree without talking: an odd interval still counts from the epoch.
    seven = EveryTicks(timedelta(seconds=7))
    tick = seven.next_after(utc(2026, 1, 1))
    assert int(tick.timestamp()) % 7 == 0 and tick > utc(2026, 1, 1)


def test_schedule_next_ticks_and_rule():
    daily = Schedule("d", "tests.noop", cron="0 3 * * *", timezone=PARIS)
    assert daily.rule == "0 3 * * *"
    assert daily.next_ticks(utc(2026, 1, 1)) == [
        utc(2026, 1, 1, 2), utc(2026, 1, 2, 2), utc(2026, 1, 3, 2)]
    every = Schedule("e", "tests.noop", every=timedelta(seconds=90))
    assert every.rule == "every 90s"


@pytest.mark.parametrize(("expression", "expected"), [
    ("0 3 * * *", None),
    ("@daily", None),
    ("* * *", "has 3 fields"),
    ("0 0 * * * *", "has 6 fields"),
    ("61 * * * *", "is not valid"),
    ("", "non-empty"),
    (5, "non-empty"),
])
def test_cron_problems(expression, expected):
    problem = cron_problem(expression)
    assert (problem is None) if expected is None else (expected in problem)
