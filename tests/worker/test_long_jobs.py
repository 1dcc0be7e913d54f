"""Long jobs through real `queue_work` subprocesses on every store: `cx.iterate` saves its
cursor and hands over at a stop signal, `cx.step` runs once across attempts, `Snooze`
sends a job back without charging a try."""

from __future__ import annotations

import signal
from collections import Counter

import pytest

from laterite_django.core.checkpoint import Checkpoint
from laterite_django.models import FailedJob
from tests.conftest import Stderr, wait_for
from tests.testapp import jobs
from tests.testapp.models import Record

ENV = {"LATERITE_TEST_LOG_LEVEL": "INFO"}


def seen(kind: str) -> Counter:
    return Counter(Record.objects.filter(kind=kind).values_list("value", flat=True))


def drain(workers, *args: str, timeout: float = 120) -> str:
    done = workers.run("--stop-when-empty", *args, timeout=timeout, env=ENV)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stderr


def stored_checkpoint(store, job_id) -> Checkpoint:
    claims = store.claim(["default"], "test-peek", limit=1)
    assert [c.id for c in claims] == [job_id]
    try:
        return Checkpoint.parse(store.checkpoint(claims[0]))
    finally:
        store.release(claims[0], claims[0].available_at, uncharged=True, started=False)


def test_iterate_walks_every_item_once(store, workers):
    jobs.walk.push(1000, 100)
    drain(workers)
    assert seen("walk") == Counter(str(n) for n in range(1000))
    assert all(c.total == 0 for c in store.counts().values())


@pytest.mark.parametrize("descending", [False, True])
def test_iterate_walks_a_queryset_by_keyset(store, workers, descending):
    Record.objects.bulk_create(Record(kind="src", value=f"v{i}") for i in range(250))
    jobs.walk_rows.push("src", 40, descending=descending)
    drain(workers)
    assert seen("src-seen") == Counter(f"v{i}" for i in range(250))
    order = list(Record.objects.filter(kind="src-seen").order_by("id")
                 .values_list("value", flat=True))
    expected = [f"v{i}" for i in range(250)]
    assert order == (expected[::-1] if descending else expected)


def test_a_stop_signal_hands_the_job_over_at_a_chunk_boundary(store, workers):
    """SIGTERM mid-walk: the job goes back due now with its cursor, not charged a try;
    the next worker starts after the last chunk done: every number once."""
    pushed = jobs.walk.push(600, 20, pause=0.1)  # 30 chunks, ~3 s
    proc = workers.start("--processes", "1", env=ENV)
    err = Stderr(proc)
    wait_for(lambda: Record.objects.filter(kind="walk").count() >= 100, timeout=60)
    # queue_status and the admin show how far it is: items done, and where.
    running = wait_for(lambda: [r for r in store.running() if r.progress is not None])
    assert running[0].progress.done >= 20 and running[0].progress.note.startswith("at ")
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 0, err.text()
    done_before = Record.objects.filter(kind="walk").count()
    assert 100 <= done_before < 600 and done_before % 20 == 0, done_before
    counts = store.counts()["default"]
    assert (counts.pending, counts.running) == (1, 0)
    checkpoint = stored_checkpoint(store, pushed.id)
    assert checkpoint.iterations[0].done == done_before
    assert checkpoint.iterations[0].cursor == done_before
    drain(workers)
    assert seen("walk") == Counter(str(n) for n in range(600))
    attempts = set(Record.objects.filter(kind="walk").values_list("attempt", flat=True))
    assert attempts == {1, 2}  # a new attempt number, though no try was charged
    assert not FailedJob.objects.exists()


def test_hand_overs_never_use_up_the_tries(store, workers):
    """More stop signals than the job has tries: it still finishes (tries=3)."""
    jobs.walk.push(400, 20, pause=0.1)
    for round_ in range(4):
        proc = workers.start("--processes", "1", env=ENV)
        err = Stderr(proc)
        at_least = (round_ + 1) * 40
        wait_for(lambda n=at_least: Record.objects.filter(kind="walk").count() >= n,
                 timeout=60)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0, err.text()
    drain(workers)
    assert seen("walk") == Counter(str(n) for n in range(400))
    assert not FailedJob.objects.exists()


def test_a_step_runs_once_across_attempts(store, workers):
    jobs.charge.push("o1", fail_after=2)
    drain(workers)
    assert list(Record.objects.filter(kind="charged").values_list("value", "attempt")) == [
        ("o1", 1)]
    receipts = list(Record.objects.filter(kind="receipt").order_by("id")
                    .values_list("value", "attempt"))
    assert receipts == [("ch_o1_1", 1), ("ch_o1_1", 2), ("ch_o1_1", 3)]
    assert not FailedJob.objects.exists()


def test_a_snoozed_job_comes_back_without_spending_a_try(store, workers):
    jobs.snoozy.push("s", times=3, seconds=0)  # tries=1: a charged try would fail it
    stderr = drain(workers)
    assert seen("snoozy-run") == Counter({"s": 4}) and seen("snoozy-done") == Counter({"s": 1})
    assert not FailedJob.objects.exists()
    assert "snoozed; back in 0 s, its tries unchanged" in stderr


def test_a_snooze_waits_its_time(store, workers):
    jobs.snoozy.push("later", times=1, seconds=60)
    drain(workers)
    assert seen("snoozy-run") == Counter({"later": 1})
    counts = store.counts()["default"]
    assert (counts.delayed, counts.pending, counts.running) == (1, 0, 0)
    job_id = jobs.snoozy.push("now", times=0, seconds=0).id
    drain(workers)
    assert seen("snoozy-done") == Counter({"now": 1})
    assert job_id is not None


def test_snoozes_past_the_ceiling_fail_the_job_saying_so(store, workers):
    jobs.snoozy_twice.push("tired", times=5, seconds=0)
    drain(workers)
    assert seen("snoozy-run") == Counter({"tired": 3})
    row = FailedJob.objects.get()
    assert row.error.startswith("Snooze: 0 s")
    assert "snoozed 2 times, its max_snoozes (2)" in row.error


def test_a_snooze_with_a_bad_delay_fails_the_job_naming_it(store, workers):
    jobs.snoozy.push("bad", times=1, seconds=-5)
    drain(workers)
    row = FailedJob.objects.get()
    assert "Snooze delay must be >= 0 seconds, got -5" in row.error
