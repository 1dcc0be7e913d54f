"""Whatever a job, its options or a signal receiver does, the worker lives and settles it.

Real `queue_work` subprocesses on every store: an error while settling must
never kill a worker, undo an attempt or run a job past its tries; a timed-out
attempt is recorded as timed out whatever the job catches; a job that finished
is deleted before a slow job holds it, and jobs held behind a slow one are
given back without losing an attempt.
"""

from __future__ import annotations

import signal
import time

import pytest

from laterite_django.models import FailedJob
from laterite_django.worker import execute
from tests.conftest import wait_for
from tests.testapp import jobs
from tests.testapp.models import Record
from tests.worker.test_processes import kill_tree


def kinds(kind: str) -> list[tuple[str, int]]:
    return list(Record.objects.filter(kind=kind).order_by("id").values_list("value", "attempt"))


def drain(workers, *args: str, env: dict | None = None) -> str:
    result = workers.run("--stop-when-empty", *args, timeout=60, env=env)
    assert result.returncode == 0, result.stderr
    return result.stderr


def test_a_backoff_that_raises_fails_the_job_once(store, workers):
    jobs.bad_backoff.push("b")
    jobs.record.push("after")
    stderr = drain(workers)
    assert kinds("bad-backoff") == [("b", 1)]  # not run again with its attempt undone
    assert kinds("record") == [("after", 1)]  # the worker went on
    row = FailedJob.objects.get()
    assert row.attempts == 1
    assert row.error_summary == "builtins.RuntimeError: try me again".removeprefix("builtins.")
    assert "Not retried: the backoff failed (RuntimeError: no backoff for attempt 1)" in row.error
    assert "Worker error" not in stderr


def test_a_retry_delay_out_of_range_fails_the_job_with_the_reason(store, workers):
    jobs.far_retry.push("f")
    drain(workers)
    assert kinds("far-retry") == [("f", 1)]
    row = FailedJob.objects.get()
    assert row.error.startswith("Retry: in a very long while")
    assert "Retry delay of 1e+12 s is beyond" in row.error


def test_receivers_that_raise_change_nothing(store, workers):
    jobs.record.push("ok")
    jobs.flaky.push("f", succeed_on=2)  # job_retrying's receiver raises KeyboardInterrupt
    jobs.always_broken.push("x")  # job_failed's receiver raises SystemExit
    stderr = drain(workers, env={"LATERITE_TEST_RAISING_RECEIVERS": "1"})
    assert kinds("record") == [("ok", 1)]  # job_started's and job_succeeded's raise
    assert kinds("flaky-attempt") == [("f", 1), ("f", 2)]
    assert kinds("broken") == [("x", 1), ("x", 2)]
    assert FailedJob.objects.get().attempts == 2
    assert all(c.total == 0 for c in store.counts().values())
    assert "a receiver of job_started broke" in stderr
    assert "Worker error" not in stderr


def test_a_job_that_swallows_its_timeout_is_recorded_as_timed_out(store, workers):
    jobs.swallow_timeout.push(3)
    drain(workers)
    assert kinds("swallow-start") == [("", 1)]
    row = FailedJob.objects.get()
    assert row.error_summary == "JobTimeout: timed out after 0.5 s"
    # Interrupted again and again (about once a second), not once.
    assert len(kinds("swallowed")) >= 2


def test_an_async_job_blocked_in_a_thread_times_out(store, workers):
    # Blocked far longer than the drain may take: the worker must leave it behind.
    jobs.async_blocked.push(600)
    jobs.async_record.push("then")  # its ORM calls do not queue behind the stuck thread
    jobs.record.push("after")
    drain(workers)
    row = FailedJob.objects.get()
    assert row.error_summary == "JobTimeout: timed out after 0.5 s"
    assert kinds("async") == [("then", 1)]
    assert kinds("record") == [("after", 1)]


def test_a_timeout_never_fires_in_the_workers_frames():
    """The alarm landing between the job's return and the disarm is put off, not raised."""
    frame = execute.run_job.__code__
    assert frame in execute._SHIELDED
    execute._alarm.seconds = 0.5
    try:

        class Frame:
            f_code = frame

        execute._on_alarm(signal.SIGALRM, Frame())  # type: ignore[arg-type]
        assert not execute._alarm.fired
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        execute._alarm.seconds = None


@pytest.mark.slow
def test_a_slow_job_does_not_hold_finished_or_unstarted_jobs(store, workers):
    """--processes 1 with batches, SIGKILLed while a slow job runs behind quick ones."""
    jobs.noop.push_many([(i,) for i in range(40)])  # the batch grows on quick jobs
    jobs.patient.push(4, "slow")
    jobs.chaos_once.push_many([(i, 0.0) for i in range(30)])
    env = {"LATERITE_TEST_RETRY_AFTER": "2"}
    proc = workers.start("--processes", "1", "--batch", "20", env=env)
    try:
        wait_for(lambda: kinds("patient-start"), timeout=30)
        time.sleep(1.0)  # the heartbeat relieves the batch within a moment
        # Only the slow job is still claimed: the finished ones are deleted, the
        # ones behind it given back (no attempt counted).
        counts = store.counts()["default"]
        assert counts.running == 1, counts
    finally:
        kill_tree(proc)
    time.sleep(2.5)  # its claim expires (retry_after 2 s): the next worker takes it back
    drain(workers, env=env)
    assert sorted(int(v) for v, _ in kinds("once-end")) == list(range(30))
    assert {attempt for _, attempt in kinds("once-start")} == {1}
    assert not FailedJob.objects.exists()
    # It ran again after the kill: charged if it headed its batch, else not (the
    # store cannot tell whether a job behind the head had started).
    assert [v for v, _ in kinds("patient-start")] == ["slow", "slow"]
    assert kinds("patient-end") == [("slow", kinds("patient-start")[1][1])]


def test_after_an_outage_the_sweep_deletes_its_own_finished_jobs_first(store):
    """Finished jobs still in hand when retry_after passed (the store was away) are
    deleted before the sweep looks for abandoned claims, so they do not run again."""
    from laterite_django.worker.loop import Worker

    jobs.record.push("done")
    jobs.record.push("done too")
    worker = Worker(["default"], store=store, retry_after=0.05)
    worker.hand.take(store.claim(["default"], worker.name, 2))
    while (claim := worker.hand.next()) is not None:
        worker.hand.succeeded(claim)  # ran; deleted with the next claim, normally
    time.sleep(0.2)  # longer than retry_after: the claims look abandoned
    worker._sweep()
    assert all(c.total == 0 for c in store.counts().values()), store.counts()
    assert not FailedJob.objects.exists()


def test_a_job_given_back_keeps_its_place_in_line(store):
    """Given back unstarted (the batch behind a slow job relieved, or a stop), a job
    goes back where it was in line: before the jobs pushed after it (every store)."""
    from laterite_django.worker.loop import Worker

    jobs.record.push_many([("first",), ("second",)])
    worker = Worker(["default"], store=store)
    claims = store.claim(["default"], worker.name, 2)
    jobs.record.push("third")  # due before the first two come back
    worker._give_back(claims)
    again = store.claim(["default"], worker.name, 3)
    assert [claim.payload for claim in again] == [
        f'{{"args":["{value}"],"kwargs":{{}}}}' for value in ("first", "second", "third")]
    assert [claim.attempts for claim in again] == [1, 1, 1]  # not charged a try
