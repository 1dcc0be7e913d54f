"""Schedules fired by real `queue_work` processes on every store: each tick pushed once
across several commands, one of them SIGKILLed and started again; the scheduler of a
single-process worker; `--no-scheduler`; and `queue_schedules`."""

from __future__ import annotations

import json
import signal
import time
from datetime import datetime, timedelta

import pytest

from laterite_django import payload
from tests.conftest import Stderr, short_or_full, wait_for
from tests.testapp.models import Record
from tests.worker.test_processes import kill_tree

pytestmark = pytest.mark.slow

# Pushed to a queue no worker takes from, so the test reads every push back.
EVERY_SECOND = {"tick": {"job": "tests.scheduled", "every": 1, "queue": "scheduled"}}


def schedules_env(definitions: dict) -> dict[str, str]:
    return {"LATERITE_TEST_SCHEDULES": json.dumps(definitions)}


def scheduled_waiting(store) -> int:
    counts = store.counts().get("scheduled")
    return counts.waiting if counts else 0


def stop(procs) -> list[str]:
    """SIGTERM the commands, wait for each; return their stderr."""
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    errors = []
    for proc in procs:
        _, err = proc.communicate(timeout=60)
        errors.append(err or "")
    return errors


def test_every_tick_is_pushed_once_by_three_commands_one_killed_and_restarted(
        store, workers):
    env = schedules_env(EVERY_SECOND)
    commands = [workers.start("--processes", "2", "--name", f"host{n}", env=env)
                for n in range(3)]
    wait_for(lambda: scheduled_waiting(store) >= 3, timeout=60)
    time.sleep(short_or_full(3, 5))
    kill_tree(commands[0])  # mid-run, whatever it was doing: no settling, no goodbye
    time.sleep(short_or_full(2, 3))
    commands.append(workers.start("--processes", "2", "--name", "host0-again", env=env))
    time.sleep(short_or_full(5, 9))
    stop(commands[1:])
    jobs = store.claim(["scheduled"], "test", limit=1000)
    ticks = [payload.schedule_of(job.payload) for job in jobs]
    assert {name for name, _ in ticks} == {"tick"}
    moments = sorted(tick for _, tick in ticks)
    assert len(moments) == len(set(moments)), "a tick was pushed twice"
    first, last = moments[0], moments[-1]
    assert len(moments) >= short_or_full(9, 15)
    expected = [first + timedelta(seconds=n) for n in range(int((last - first).seconds) + 1)]
    assert moments == expected, "a tick was lost"
    assert all(m.microsecond == 0 for m in moments)


def test_a_single_process_worker_fires_and_runs_its_schedules(store, workers):
    env = schedules_env({"hello": {"job": "tests.scheduled", "every": 1,
                                   "kwargs": {"label": "hi"}}})
    proc = workers.start("--processes", "1", env=env)
    err = Stderr(proc)
    wait_for(lambda: Record.objects.filter(kind="scheduled").count() >= 2, timeout=60)
    proc.send_signal(signal.SIGTERM)
    proc.wait(30)
    values = list(Record.objects.filter(kind="scheduled").values_list("value", flat=True))
    assert proc.returncode == 0, err.text()
    for value in values:
        name, at, label = value.split("|")
        assert name == "hello" and label == "hi"
        assert datetime.fromisoformat(at).microsecond == 0
    assert len(set(values)) == len(values)


def test_no_scheduler_fires_nothing(store, workers):
    env = schedules_env(EVERY_SECOND)
    proc = workers.start("--processes", "1", "--no-scheduler", env=env)
    with_scheduler = workers.start("--processes", "1", "--queue", "none", "--max-seconds",
                                   "3", env=schedules_env({}))
    with_scheduler.communicate(timeout=60)  # it ran 3 s with no schedule configured
    assert proc.poll() is None
    stop([proc])
    assert scheduled_waiting(store) == 0
    assert store.schedule_states(["tick"]) == {}


def test_queue_schedules_lists_pauses_resumes_and_runs(store, workers):
    definitions = {"tick": {"job": "tests.scheduled", "every": 1, "queue": "scheduled"},
                   "nightly": {"job": "tests.scheduled", "cron": "30 2 * * *",
                               "timezone": "Europe/Paris"}}

    def command(*args: str):
        done = workers.command("queue_schedules", *args, env=schedules_env(definitions))
        assert done.returncode == 0, done.stderr
        return done.stdout

    listed = json.loads(command("--json"))
    assert [row["name"] for row in listed] == ["tick", "nightly"]
    nightly = listed[1]
    assert nightly["rule"] == "30 2 * * *" and nightly["timezone"] == "Europe/Paris"
    assert len(nightly["next"]) == 3 and nightly["last"] is None and not nightly["paused"]
    assert "02:30:00 CET" in command() or "02:30:00 CEST" in command()
    assert "paused" in command("--pause", "tick")
    assert json.loads(command("--json"))[0]["paused"] is True
    proc = workers.start("--processes", "1", env=schedules_env(definitions))
    time.sleep(2.5)  # a scheduler runs; the paused schedule fires nothing
    assert scheduled_waiting(store) == 0
    out = command("--run", "tick")
    assert "pushed job #" in out
    assert scheduled_waiting(store) == 1
    command("--resume", "tick")
    wait_for(lambda: scheduled_waiting(store) >= 3, timeout=30)
    stop([proc])
    row = json.loads(command("--json"))[0]
    assert row["paused"] is False and row["last"] is not None and row["last_job_id"]
    bad = workers.command("queue_schedules", "--pause", "nope", env=schedules_env(definitions))
    assert bad.returncode == 1 and "No schedule is named 'nope'" in bad.stderr


def test_the_worker_mode_fires_schedules_in_a_thread(store):
    import threading

    from django.test import override_settings

    from laterite_django.worker import threads
    from tests.testapp import jobs

    with override_settings(LATERITE_QUEUE_MODE="worker", LATERITE_QUEUE_WORKERS=1,
                           LATERITE_QUEUE_SCHEDULES={"beat": {"job": "tests.scheduled",
                                                              "every": 1}}):
        try:
            jobs.noop.push()  # the first push starts the threads, the scheduler's too
            assert "laterite-scheduler" in {t.name for t in threading.enumerate()}
            wait_for(lambda: Record.objects.filter(kind="scheduled").count() >= 2, timeout=30)
        finally:
            threads.stop_all()
    wait_for(lambda: "laterite-scheduler" not in {t.name for t in threading.enumerate()},
             timeout=10)
    values = list(Record.objects.filter(kind="scheduled").values_list("value", flat=True))
    assert all(value.startswith("beat|") for value in values)


DIES_MID_FIRE = """
import os, signal, django
django.setup()
from datetime import datetime, timedelta
from laterite_django.schedules.definition import Schedule
from laterite_django.schedules.scheduler import new_job
from laterite_django.stores import get_store
from laterite_django.stores.database import DatabaseStore
from laterite_django.stores.schedule_state import ScheduleFire

push = DatabaseStore.push
def push_then_die(self, jobs):
    push(self, jobs)  # the job is written, the cursor moved: the transaction is open
    os.kill(os.getpid(), signal.SIGKILL)
DatabaseStore.push = push_then_die
tick = datetime.fromisoformat(os.environ["TICK"])
schedule = Schedule("tick", "tests.scheduled", every=timedelta(seconds=1))
get_store().fire_schedule(ScheduleFire("tick", tick, new_job(schedule, tick)))
"""


def test_a_scheduler_killed_mid_fire_leaves_the_tick_to_the_next(store, workers):
    """The database store: killed inside the fire transaction, after the push; the
    transaction rolls back, so neither the cursor nor the job moved, and the next
    scheduler fires that tick. (On Redis the step is one script: all or nothing.)"""
    import subprocess
    import sys

    from django.utils import timezone as dj_timezone

    from laterite_django.schedules.definition import Schedule
    from laterite_django.schedules.scheduler import new_job
    from laterite_django.stores.schedule_state import ScheduleFire
    from tests.conftest import ROOT

    if workers.store_kind != "database":
        pytest.skip("the Redis store fires a tick in one Lua script")
    start = dj_timezone.now().replace(microsecond=0)
    store.add_schedules(["tick"], start)
    tick = start + timedelta(seconds=1)
    died = subprocess.run([sys.executable, "-c", DIES_MID_FIRE], cwd=ROOT, timeout=60,
                          env=workers.env(TICK=tick.isoformat()), capture_output=True,
                          text=True)
    assert died.returncode == -signal.SIGKILL, died.stderr
    assert store.schedule_states(["tick"])["tick"].last_tick == start
    assert scheduled_waiting(store) == 0 and store.counts() == {}
    schedule = Schedule("tick", "tests.scheduled", every=timedelta(seconds=1))
    fired = store.fire_schedule(ScheduleFire("tick", tick, new_job(schedule, tick)))
    assert fired.outcome == "pushed"
    assert store.schedule_states(["tick"])["tick"].last_tick == tick
