"""The store's side of schedules, on every store: state, the atomic fire step (a tick
fires once, however many try), pause and resume, overlap, run now; and the scheduler
over it with a controllable clock."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connections
from django.test import override_settings
from django.utils import timezone

from laterite_django import payload
from laterite_django.schedules import actions
from laterite_django.schedules.definition import Schedule
from laterite_django.schedules.scheduler import Scheduler, SchedulerThread, new_job
from laterite_django.stores.schedule_state import ScheduleFire
from laterite_django.testing import run_jobs
from tests.testapp.models import Record

T0 = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
PING = Schedule("ping", "tests.scheduled", every=timedelta(seconds=1))


def claimed(store, queue: str = "default") -> list:
    return store.claim([queue], "test", limit=500)


def ticks_of(claims) -> list[datetime]:
    return sorted(payload.schedule_of(c.payload)[1] for c in claims)


def test_add_and_read_states(store):
    assert store.schedule_states(["ping", "other"]) == {}
    assert store.add_schedules(["ping"], T0) == 1
    assert store.add_schedules(["ping", "other"], T0 + timedelta(hours=1)) == 1
    states = store.schedule_states(["ping", "other", "none"])
    assert set(states) == {"ping", "other"}
    assert states["ping"].last_tick == T0 and not states["ping"].paused
    assert states["other"].last_tick == T0 + timedelta(hours=1)
    assert states["ping"].fired_at is None and states["ping"].job_id is None


def test_a_tick_fires_once_and_the_cursor_only_moves_forward(store):
    store.add_schedules(["ping"], T0)
    tick = T0 + timedelta(seconds=1)
    first = store.fire_schedule(ScheduleFire("ping", tick, new_job(PING, tick)))
    assert first.outcome == "pushed" and first.id
    assert store.fire_schedule(ScheduleFire("ping", tick, new_job(PING, tick))).outcome == "lost"
    assert store.fire_schedule(ScheduleFire("ping", T0, new_job(PING, T0))).outcome == "lost"
    later = tick + timedelta(seconds=1)
    assert store.fire_schedule(ScheduleFire("ping", later, new_job(PING, later))).outcome == (
        "pushed")
    state = store.schedule_states(["ping"])["ping"]
    assert state.last_tick == later and state.fired_at == later
    jobs = claimed(store)
    assert ticks_of(jobs) == [tick, later]
    assert {int(c.id) for c in jobs} >= {int(first.id)}
    assert state.job_id == max(int(c.id) for c in jobs)


def test_advance_moves_the_cursor_without_a_job(store):
    store.add_schedules(["ping"], T0)
    moved = store.fire_schedule(ScheduleFire("ping", T0 + timedelta(hours=1), None))
    assert moved.outcome == "advanced"
    assert store.schedule_states(["ping"])["ping"].last_tick == T0 + timedelta(hours=1)
    assert claimed(store) == []


def test_racing_schedulers_push_each_tick_once(store):
    """Threads, each on its own connection, fire the same ticks at once."""
    store.add_schedules(["ping"], T0)
    ticks = [T0 + timedelta(seconds=n) for n in range(1, 6)]
    outcomes: list[str] = []
    start = threading.Barrier(4)

    def scheduler() -> None:
        try:
            start.wait()
            for tick in ticks:
                outcomes.append(store.fire_schedule(
                    ScheduleFire("ping", tick, new_job(PING, tick))).outcome)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=scheduler) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert sorted(outcomes) == ["lost"] * 15 + ["pushed"] * 5
    assert ticks_of(claimed(store)) == ticks


def test_paused_fires_nothing_and_resume_skips_the_pause(store):
    store.add_schedules(["ping"], T0)
    state = store.pause_schedule("ping", True, T0)
    assert state.paused
    tick = T0 + timedelta(seconds=1)
    assert store.fire_schedule(ScheduleFire("ping", tick, new_job(PING, tick))).outcome == (
        "paused")
    resumed = store.pause_schedule("ping", False, T0 + timedelta(minutes=5))
    assert not resumed.paused and resumed.last_tick == T0 + timedelta(minutes=5)
    assert claimed(store) == []
    # Pausing a schedule no scheduler has seen yet gives it a state.
    assert store.pause_schedule("new", True, T0).paused
    assert store.schedule_states(["new"])["new"].last_tick == T0


def test_no_overlap_skips_a_tick_while_the_previous_job_waits(store):
    store.add_schedules(["ping"], T0)
    one, two, three = (T0 + timedelta(seconds=n) for n in (1, 2, 3))
    assert store.fire_schedule(ScheduleFire("ping", one, new_job(PING, one), True)).outcome == (
        "pushed")
    assert store.fire_schedule(ScheduleFire("ping", two, new_job(PING, two), True)).outcome == (
        "overlap")
    (job,) = claimed(store)
    # Still running: still an overlap.
    assert store.fire_schedule(
        ScheduleFire("ping", three, new_job(PING, three), True)).outcome == "overlap"
    store.delete([job])
    four = T0 + timedelta(seconds=4)
    assert store.fire_schedule(ScheduleFire("ping", four, new_job(PING, four), True)).outcome == (
        "pushed")
    assert store.schedule_states(["ping"])["ping"].last_tick == four


def test_run_now_pushes_outside_the_ticks(store):
    now = timezone.now()
    job = new_job(PING, now)
    job.pushed_at = now
    fired = store.fire_schedule(ScheduleFire("ping", None, job))
    assert fired.outcome == "pushed"
    state = store.schedule_states(["ping"])["ping"]
    assert state.fired_at == now and str(state.job_id) == str(fired.id)
    assert state.last_tick is not None and state.last_tick <= now
    store.pause_schedule("ping", True, now)
    assert store.fire_schedule(ScheduleFire("ping", None, new_job(PING, now))).outcome == (
        "pushed")
    assert len(claimed(store)) == 2


class Clock:
    """A clock the test moves."""

    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


def test_two_schedulers_with_one_clock_fire_each_tick_once(store):
    clock = Clock(T0 + timedelta(milliseconds=300))
    schedules = [PING, Schedule("slow", "tests.scheduled", every=timedelta(seconds=10),
                                kwargs={"label": "slow"})]
    first = Scheduler(schedules, store=store, clock=clock)
    second = Scheduler(schedules, store=store, clock=clock)
    first.step()  # sees them first: nothing before this moment fires
    for _ in range(25):
        clock.advance(1)
        first.step() if clock.now.second % 2 else second.step()
        second.step()
    jobs = claimed(store)
    assert ticks_of(j for j in jobs if '"slow"' not in j.payload) == [
        T0 + timedelta(seconds=n) for n in range(1, 26)]
    assert ticks_of(j for j in jobs if '"slow"' in j.payload) == [
        T0 + timedelta(seconds=10), T0 + timedelta(seconds=20)]


def test_scheduler_applies_missed_after_a_stop(store):
    clock = Clock(T0)
    hourly = [Schedule("h-skip", "tests.scheduled", cron="0 * * * *"),
              Schedule("h-latest", "tests.scheduled", cron="0 * * * *", missed="latest"),
              Schedule("h-all", "tests.scheduled", cron="0 * * * *", missed="all")]
    scheduler = Scheduler(hourly, store=store, clock=clock)
    scheduler.step()
    clock.advance(5 * 3600 + 30 * 60)  # every scheduler was stopped for five hours and a half
    scheduler.step()
    by_schedule: dict[str, list[datetime]] = {}
    for job in claimed(store):
        name, tick = payload.schedule_of(job.payload)
        by_schedule.setdefault(name, []).append(tick)
    hours = [T0 + timedelta(hours=n) for n in range(1, 6)]
    assert "h-skip" not in by_schedule
    assert by_schedule["h-latest"] == hours[-1:]
    assert sorted(by_schedule["h-all"]) == hours
    # Skipped: the cursor moved past them all, no job.
    assert store.schedule_states(["h-skip"])["h-skip"].last_tick == hours[-1]


def test_missed_limit_caps_the_catch_up(store):
    clock = Clock(T0)
    hourly = Schedule("h-all", "tests.scheduled", cron="0 * * * *", missed="all",
                      missed_limit=3)
    scheduler = Scheduler([hourly], store=store, clock=clock)
    scheduler.step()
    clock.advance(5 * 3600 + 30 * 60)
    scheduler.step()
    assert ticks_of(claimed(store)) == [T0 + timedelta(hours=n) for n in (3, 4, 5)]


def test_a_changed_rule_starts_from_its_change(store):
    """`every 3600` becomes `every 1` (missed="all") while the schedulers restart: the
    ticks of the new rule before the change do not fire; the ones after it do."""
    clock = Clock(T0)
    hourly = Schedule("ping", "tests.scheduled", every=timedelta(hours=1), missed="all")
    Scheduler([hourly], store=store, clock=clock).step()
    clock.advance(5 * 60)  # the deploy: five minutes, then the new rule
    changed = Schedule("ping", "tests.scheduled", every=timedelta(seconds=1), missed="all")
    scheduler = Scheduler([changed], store=store, clock=clock)
    scheduler.step()
    assert claimed(store) == []
    assert store.schedule_states(["ping"])["ping"].last_tick == clock.now
    clock.advance(2)
    scheduler.step()
    assert ticks_of(claimed(store)) == [T0 + timedelta(seconds=301),
                                        T0 + timedelta(seconds=302)]
    # Another scheduler with the same new rule changes nothing more.
    Scheduler([changed], store=store, clock=clock).step()
    assert store.schedule_states(["ping"])["ping"].last_tick == clock.now


def test_a_timezone_change_is_a_change_and_arguments_are_not(store):
    from zoneinfo import ZoneInfo

    clock = Clock(T0)
    daily = Schedule("d", "tests.scheduled", cron="0 * * * *", missed="all")
    Scheduler([daily], store=store, clock=clock).step()
    clock.advance(2 * 3600 + 60)
    Scheduler([Schedule("d", "tests.scheduled", cron="0 * * * *", missed="all",
                        kwargs={"label": "new"})], store=store, clock=clock).step()
    assert ticks_of(claimed(store)) == [T0 + timedelta(hours=1), T0 + timedelta(hours=2)]
    clock.advance(2 * 3600)
    Scheduler([Schedule("d", "tests.scheduled", cron="0 * * * *", missed="all",
                        timezone=ZoneInfo("Asia/Kolkata"))], store=store, clock=clock).step()
    assert claimed(store) == []


def test_a_state_kept_before_rules_were_adopts_its_rule(store):
    """A state from a version that kept no rule takes the configured one and keeps its
    cursor: upgrading loses no tick."""
    store.add_schedules(["ping"], T0)
    clock = Clock(T0 + timedelta(seconds=3))
    Scheduler([PING], store=store, clock=clock).step()
    assert ticks_of(claimed(store)) == [T0 + timedelta(seconds=n) for n in (1, 2, 3)]


def test_a_changed_rule_moves_the_cursor_forward_only(store):
    clock = Clock(T0)
    Scheduler([PING], store=store, clock=clock).step()
    store.fire_schedule(ScheduleFire("ping", T0 + timedelta(hours=1), None))
    slower = Schedule("ping", "tests.scheduled", every=timedelta(seconds=2))
    assert store.define_schedules({"ping": slower.rule_hash}, T0) == ["ping"]
    assert store.schedule_states(["ping"])["ping"].last_tick == T0 + timedelta(hours=1)
    assert store.schedule_states(["ping"])["ping"].rule_hash == slower.rule_hash
    assert store.define_schedules({"ping": slower.rule_hash, "none": "x"}, T0) == []


REMOVABLE = {"ping": {"job": "tests.scheduled", "every": 60, "missed": "all"},
             "other": {"job": "tests.scheduled", "every": 3600, "kwargs": {"label": "o"}}}


def test_a_removed_schedule_starts_from_its_return(store):
    """Taken out of the settings for 90 minutes while schedulers ran, then put back:
    none of the 90 ticks of its absence fire."""
    clock = Clock(T0)
    with override_settings(LATERITE_QUEUE_SCHEDULES=REMOVABLE):
        Scheduler(store=store, clock=clock).step()
    with override_settings(LATERITE_QUEUE_SCHEDULES={"other": REMOVABLE["other"]}):
        without = Scheduler(store=store, clock=clock)
        for _ in range(90):
            clock.advance(60)
            without.step()
    with override_settings(LATERITE_QUEUE_SCHEDULES=REMOVABLE):
        back = Scheduler(store=store, clock=clock)
        back.step()
        assert [j for j in claimed(store) if '"o"' not in j.payload] == []
        clock.advance(60)
        back.step()
    assert ticks_of(j for j in claimed(store)) == [T0 + timedelta(minutes=91)]


def test_a_schedule_removed_with_all_the_others_starts_from_its_return(store):
    clock = Clock(T0)
    with override_settings(LATERITE_QUEUE_SCHEDULES={"ping": REMOVABLE["ping"]}):
        Scheduler(store=store, clock=clock).step()
    with override_settings(LATERITE_QUEUE_SCHEDULES={}):
        thread = SchedulerThread(Scheduler(store=store, clock=clock)).start()
        assert thread.thread is None  # nothing to fire: no thread, only the sweep
    clock.advance(90 * 60)
    with override_settings(LATERITE_QUEUE_SCHEDULES={"ping": REMOVABLE["ping"]}):
        Scheduler(store=store, clock=clock).step()
    assert claimed(store) == []


def test_scheduler_skips_paused_schedules(store):
    clock = Clock(T0)
    scheduler = Scheduler([PING], store=store, clock=clock)
    scheduler.step()
    store.pause_schedule("ping", True, clock.now)
    clock.advance(3)
    scheduler.step()
    assert claimed(store) == []
    store.pause_schedule("ping", False, clock.now)
    clock.advance(2)
    scheduler.step()
    assert ticks_of(claimed(store)) == [T0 + timedelta(seconds=4), T0 + timedelta(seconds=5)]


def test_the_job_knows_its_schedule_and_tick(store):
    clock = Clock(T0)
    scheduler = Scheduler([Schedule("ping", "tests.scheduled", every=timedelta(seconds=1),
                                    kwargs={"label": "hi"})], store=store, clock=clock)
    scheduler.step()
    clock.advance(1)
    scheduler.step()
    jobs_run = run_jobs()
    assert jobs_run == 1
    (record,) = Record.objects.filter(kind="scheduled")
    assert record.value == f"ping|{(T0 + timedelta(seconds=1)).isoformat()}|hi"


def test_a_plain_push_has_no_schedule(store):
    from tests.testapp.jobs import scheduled

    scheduled.push(label="plain")
    run_jobs()
    assert Record.objects.get(kind="scheduled").value == "None||plain"


SETTINGS = {"ping": {"job": "tests.scheduled", "every": 60},
            "daily": {"job": "tests.scheduled", "cron": "30 2 * * *",
                      "timezone": "Europe/Paris", "kwargs": {"label": "daily"}}}


@pytest.fixture
def configured(store):
    with override_settings(LATERITE_QUEUE_SCHEDULES=SETTINGS):
        yield store


def test_listing_pause_resume_run(configured):
    store = configured
    rows = {row.name: row for row in actions.listing()}
    assert set(rows) == {"ping", "daily"}
    assert rows["daily"].state is None and len(rows["daily"].next_ticks) == 3
    assert rows["daily"].next_ticks[0].astimezone(
        rows["daily"].schedule.timezone).strftime("%H:%M") in {"02:30", "03:00"}
    assert actions.pause("daily").paused
    assert actions.listing()[1].paused and actions.listing()[1].next_ticks == []
    assert not actions.resume("daily").paused
    fired = actions.run_now("daily")
    assert fired.outcome == "pushed"
    row = {row.name: row for row in actions.listing()}["daily"]
    assert str(row.last_job_id) == str(fired.id) and row.last_fired is not None
    (job,) = claimed(store)
    assert payload.schedule_of(job.payload) == ("daily", row.last_fired)
    assert payload.decode(job.payload)[1] == {"label": "daily"}


def test_a_daily_local_job_fires_once_on_each_dst_day(store):
    """A scheduler looking every 10 minutes from 27 to 31 March and 23 to 27 October
    (Paris): 02:30 every day, 03:00 on the day 02:30 does not exist, and once on the
    day it happens twice."""
    from zoneinfo import ZoneInfo

    paris = ZoneInfo("Europe/Paris")
    daily = Schedule("daily", "tests.scheduled", cron="30 2 * * *", timezone=paris)
    fired: list[str] = []
    for start in (datetime(2026, 3, 27, tzinfo=paris), datetime(2026, 10, 23, tzinfo=paris)):
        clock = Clock(start.astimezone(UTC))
        scheduler = Scheduler([daily], store=store, clock=clock)
        store.pause_schedule("daily", False, clock.now)  # the cursor to this moment
        for _ in range(4 * 24 * 6):
            clock.advance(600)
            scheduler.step()
        fired += [tick.astimezone(paris).strftime("%m-%d %H:%M %Z")
                  for tick in ticks_of(claimed(store))]
    assert fired == [
        "03-27 02:30 CET", "03-28 02:30 CET", "03-29 03:00 CEST", "03-30 02:30 CEST",
        "10-23 02:30 CEST", "10-24 02:30 CEST", "10-25 02:30 CEST", "10-26 02:30 CET",
    ]


def test_job_states_say_where_each_job_is(store):
    from tests.testapp import jobs

    running = jobs.scheduled.push(label="run").id
    failing = jobs.add.push(1, 2).id
    done = jobs.noop.push(1).id
    claims = {int(c.id): c for c in store.claim(["default"], "test", limit=10)}
    store.fail(claims[int(failing)], "boom")
    store.delete([claims[int(done)]])
    waiting = jobs.noop.push().id
    delayed = jobs.noop.push_in(3600).id
    states = store.job_states([waiting, delayed, running, failing, done, 999999])
    assert states == {int(waiting): "waiting", int(delayed): "delayed",
                      int(running): "running", int(failing): "failed"}
    assert store.job_states([]) == {}


def test_listing_says_the_outcome_of_the_last_job(configured):
    store = configured
    fired = actions.run_now("ping")
    assert {r.name: r for r in actions.listing()}["ping"].last_outcome == "waiting"
    (job,) = claimed(store)
    assert {r.name: r for r in actions.listing()}["ping"].last_outcome == "running"
    store.delete([job])
    row = {r.name: r for r in actions.listing()}["ping"]
    assert row.last_outcome == "done" and str(row.last_job_id) == str(fired.id)
    assert row.as_dict()["last_outcome"] == "done"
