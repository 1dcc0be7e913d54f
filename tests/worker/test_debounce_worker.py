"""Debounce with real workers, on every store: many pushers for one key make one run, with
the last arguments, S seconds after the last push; pushes that never stop run at the
first push plus M.

Short in a normal run (S and M scaled down); LATERITE_TEST_FULL=1 runs the issue's own
numbers (S=5 s; pushes every second for 90 s with M=60 s).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from datetime import timedelta

import pytest
from django.utils import timezone

from tests.conftest import ROOT, Stderr, short_or_full, wait_for
from tests.testapp import jobs
from tests.testapp.models import Record

pytestmark = pytest.mark.slow

# Each pusher: `count` debounced pushes of tests.record for one key, `every` seconds apart.
PUSHER = """
import django, json, sys, time
django.setup()
from tests.testapp import jobs
name, count, every, wait = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
ids = []
for i in range(count):
    ids.append(jobs.record.push(f"{name}-{i}", debounce=wait, debounce_key="burst").id)
    time.sleep(every)
print(json.dumps(ids))
"""


def runs() -> list[Record]:
    return list(Record.objects.filter(kind="record").order_by("at"))


def test_a_burst_from_four_processes_runs_once_with_the_last_arguments(workers, store):
    wait = short_or_full(1.5, 5.0)
    worker = workers.start("--processes", "2")
    errors = Stderr(worker)
    # 4 processes, 25 pushes each, over 3 seconds.
    pushers = [subprocess.Popen(
        [sys.executable, "-c", PUSHER, f"p{n}", "25", str(3 / 25), str(wait)], cwd=ROOT,
        env=workers.env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for n in range(4)]
    ids = []
    for proc in pushers:
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        ids += json.loads(out)
    # The last push is the test's own, after every pusher ended: "last" is well defined.
    last = jobs.record.push("last", debounce=wait, debounce_key="burst")
    pushed_last = timezone.now()
    assert len(ids) == 100 and set(ids) == {last.id} and last.debounced

    (ran,) = wait_for(runs, timeout=wait + 30)
    assert ran.value == "last"
    assert ran.at >= pushed_last + timedelta(seconds=wait - 0.05)
    time.sleep(1.0)
    assert len(runs()) == 1, errors.text()
    assert store.counts().get("default") is None or store.counts()["default"].total == 0


def test_pushes_that_never_stop_run_at_the_first_push_plus_max(workers, store):
    wait, longest = short_or_full(1.0, 5.0), short_or_full(6.0, 60.0)
    every, during = short_or_full(0.2, 1.0), short_or_full(9.0, 90.0)
    worker = workers.start("--processes", "1")
    errors = Stderr(worker)
    first = timezone.now()
    pushes: list[tuple[str, object]] = []
    index = 0
    while (timezone.now() - first).total_seconds() < during:
        value = f"push-{index}"
        pushes.append((value, timezone.now()))
        jobs.record.push(value, debounce=wait, debounce_max=longest, debounce_key="steady")
        index += 1
        time.sleep(every)
    pushed_last = timezone.now()

    # The first run came at the first push plus M, with the arguments of a push just
    # before it; the pushes after it made a new run, due S after the last one.
    done = wait_for(lambda: len(runs()) >= 2 and runs(), timeout=wait + 30)
    assert isinstance(done, list)
    time.sleep(1.0)
    first_run, second_run = runs()  # exactly two runs
    assert timedelta(seconds=longest - 0.05) <= first_run.at - first <= timedelta(
        seconds=longest + 1.5), errors.text()
    pushed_at = dict(pushes)[first_run.value]
    assert first_run.at - pushed_at <= timedelta(seconds=every + 1.5)
    assert second_run.value == pushes[-1][0]
    assert second_run.at >= pushed_last + timedelta(seconds=wait - every - 0.05)
