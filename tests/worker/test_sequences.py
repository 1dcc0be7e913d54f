"""Ordered sequences with real worker processes (@job(sequence=...)): within each key the
jobs run one at a time in push order; a retry holds the rest; a failure for good holds
them until the failed head is retried; pushes racing from several processes; and the
chaos test: workers SIGKILLed at random while jobs fail and are retried.

Each run of tests.seq_step appends its start and end to a file at once
($LATERITE_TEST_SEQ_LOG, one write a line), so a run whose worker is killed still
counts: the checks read that file, not the database."""

from __future__ import annotations

import itertools
import random
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

import psutil
import pytest

from laterite_django.models import FailedJob
from tests.conftest import ROOT, Stderr, short_or_full, wait_for
from tests.testapp import jobs
from tests.worker.test_processes import kill_tree, worker_pids

Runs = dict[tuple[str, int], list[tuple[str, float]]]


def read_runs(log: Path) -> Runs:
    """(key, n) -> the (kind, time) of each line of its runs, in the file's order."""
    runs: Runs = defaultdict(list)
    if not log.exists():
        return runs
    for line in log.read_text().splitlines():
        kind, key, n, _attempt, _pid, at = line.split()
        runs[key, int(n)].append((kind, float(at)))
    return runs


def assert_in_order(runs: Runs, order: dict[str, list[int]]) -> None:
    """Within each key, in push order: every job ran, and every line of a job (its
    starts and ends, of every run) comes before the first line of the next one: never
    two of a key at once, the first starts in push order."""
    for key, numbers in order.items():
        for n in numbers:
            assert any(kind == "start" for kind, _ in runs.get((key, n), [])), (
                f"{key}/{n} never started")
        for before, after in itertools.pairwise(numbers):
            last = max(at for _, at in runs[key, before])
            first = min(at for _, at in runs[key, after])
            assert last < first, (
                f"{key}/{after} started at {first:.6f} before {key}/{before} ended "
                f"at {last:.6f}")


def left(store, ids: list[int]) -> int:
    """Those of `ids` still in the store (waiting, held, running), plus the failed jobs."""
    return len(store.job_states(ids)) + FailedJob.objects.count()


def test_each_key_runs_in_push_order_a_failed_head_holds_its_key_until_retried(
        store, workers, tmp_path):
    log = tmp_path / "seq.log"
    rng = random.Random(3)
    order: dict[str, list[int]] = {f"acct:{k}": [] for k in range(3)}
    calls = []
    for n in range(30):
        key = f"acct:{n % 3}"
        order[key].append(n)
        calls.append({"key": key, "n": n, "seconds": 0.01,
                      "transient": 1 if rng.random() < 0.3 else 0, "fail_once": n == 4})
    ids = [pushed.id for pushed in jobs.seq_step.push_many(calls)]
    env = {"LATERITE_TEST_SEQ_LOG": str(log), "LATERITE_TEST_RETRY_AFTER": "3"}
    proc = workers.start("--queue", "low", "--processes", "2", env=env)
    stderr = Stderr(proc)
    try:
        # Job 4 (acct:1) fails for good: acct:1 waits behind it, the others finish.
        held_behind = [n for n in order["acct:1"] if n > 4]
        others = [ids[n] for n in range(30) if n != 4 and n not in held_behind]
        wait_for(lambda: FailedJob.objects.exists() and not store.job_states(others),
                 timeout=60)
        time.sleep(0.5)
        runs = read_runs(log)
        assert not any(runs.get(("acct:1", n)) for n in held_behind)
        (held,) = store.held_sequences()
        assert (held.key, held.waiting) == ("acct:1", len(held_behind))
        # Retried, it is the head again: it runs first, then the rest of its key.
        store.retry([FailedJob.objects.get().pk])
        wait_for(lambda: left(store, ids) == 0, timeout=60)
    finally:
        kill_tree(proc)
    assert_in_order(read_runs(log), order)
    assert store.held_sequences() == []
    assert "Traceback" not in stderr.text().replace("RuntimeError", ""), stderr.text()[-2000:]


def test_a_sequence_that_goes_on_runs_past_a_failure_in_order(store, workers, tmp_path):
    log = tmp_path / "seq.log"
    jobs.seq_go_on.push_many([{"key": "k", "n": n, "fail": n == 2} for n in range(8)])
    env = {"LATERITE_TEST_SEQ_LOG": str(log)}
    result = workers.run("--queue", "low", "--stop-when-empty", env=env)
    assert result.returncode == 0, result.stderr[-2000:]
    assert_in_order(read_runs(log), {"k": list(range(8))})
    assert FailedJob.objects.count() == 1
    assert store.held_sequences() == []


_PUSHER = """
import sys
from tests.testapp import jobs
first = int(sys.argv[1])
for n in range(first, first + {count}):
    pushed = jobs.seq_step.push("race", n)
    print(n, pushed.id, flush=True)
"""


def test_pushes_racing_from_several_processes_keep_one_order(store, workers, tmp_path):
    """Four processes push 40 jobs each to one key at once: the jobs run one at a time,
    in the order the store took them (their ids), and each process's in its own order."""
    if store.__class__.__name__ == "DatabaseStore" and store.connection.vendor == "sqlite":
        timeout = 120
    else:
        timeout = 60
    count = 40
    code = _PUSHER.format(count=count)
    env = workers.env()
    pushers = [subprocess.Popen([sys.executable, "-c", "import django; django.setup()\n" + code,
                                 str(p * 1000)], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True) for p in range(4)]
    ids: dict[int, int] = {}
    for pusher in pushers:
        out, err = pusher.communicate(timeout=timeout)
        assert pusher.returncode == 0, err[-2000:]
        for line in out.split("\n"):
            if line.strip():
                n, job_id = line.split()
                ids[int(n)] = int(job_id)
    assert len(ids) == 4 * count
    log = tmp_path / "seq.log"
    result = workers.run("--queue", "low", "--processes", "2", "--stop-when-empty",
                         env={"LATERITE_TEST_SEQ_LOG": str(log)}, timeout=timeout)
    assert result.returncode == 0, result.stderr[-2000:]
    by_id = sorted(ids, key=ids.__getitem__)
    assert_in_order(read_runs(log), {"race": by_id})
    for p in range(4):  # each pusher's jobs in its own order
        mine = [n for n in by_id if n // 1000 == p]
        assert mine == sorted(mine)


@pytest.mark.slow
def test_chaos_killed_workers_failures_and_retries_keep_every_sequence_in_order(
        store, workers, tmp_path):
    """200 jobs across 10 keys (1,000 across 50 under LATERITE_TEST_FULL=1), a third
    failing once or twice before they run, one in 25 failing for good once (retried from
    the failed list as the test goes), while a worker process is SIGKILLed every 0.3 s:
    within each key the first starts are in push order and no two runs overlap."""
    from django.db import connection

    if connection.vendor != "postgresql":
        pytest.skip("the chaos test runs in the PostgreSQL leg (database and Redis stores)")
    total, keys = int(short_or_full(200, 1000)), int(short_or_full(10, 50))
    rng = random.Random(11)
    log = tmp_path / "seq.log"
    order: dict[str, list[int]] = defaultdict(list)
    calls = []
    for n in range(total):
        key = f"acct:{rng.randrange(keys)}"
        order[key].append(n)
        calls.append({"key": key, "n": n, "seconds": rng.choice([0.01, 0.05, 0.1]),
                      "transient": rng.choice([0, 0, 0, 0, 1, 2]),
                      "fail_once": rng.random() < 0.04})
    ids = [pushed.id for start in range(0, total, 100)
           for pushed in jobs.seq_step.push_many(calls[start : start + 100])]
    env = {"LATERITE_TEST_SEQ_LOG": str(log), "LATERITE_TEST_RETRY_AFTER": "2",
           "LATERITE_TEST_LOG_LEVEL": "ERROR"}
    args = ("--queue", "low", "--processes", "4")
    proc = workers.start(*args, env=env)
    stderr = Stderr(proc)
    kills = 0
    deadline = time.monotonic() + short_or_full(240, 900)
    try:
        while left(store, ids) and time.monotonic() < deadline:
            time.sleep(0.3)
            if FailedJob.objects.exists():
                store.retry()  # the failed heads take their keys again
            pids = sorted(worker_pids(proc))
            if pids and kills < short_or_full(40, 150):
                try:
                    psutil.Process(rng.choice(pids)).kill()
                    kills += 1
                except psutil.NoSuchProcess:
                    pass
        assert not left(store, ids), (f"{left(store, ids)} jobs left: {store.counts()}, held "
                                 f"{store.held_sequences()}\n{stderr.text()[-3000:]}")
    finally:
        kill_tree(proc)
    runs = read_runs(log)
    assert_in_order(runs, order)
    starts = sum(kind == "start" for lines in runs.values() for kind, _ in lines)
    print(f"\n{total} jobs over {keys} keys, {kills} workers killed, {starts} runs")
    assert kills >= 5
