"""Every rule of the worker, through a real `queue_work` subprocess on every store."""

from __future__ import annotations

import signal
import time
from datetime import timedelta

import pytest
from django.utils import timezone

from laterite_django.models import FailedJob
from laterite_django.stores import NewJob
from tests.conftest import wait_for
from tests.testapp import jobs
from tests.testapp.models import Record


def kinds(kind: str) -> list[tuple[str, int]]:
    return list(Record.objects.filter(kind=kind).order_by("id").values_list("value", "attempt"))


def drain(workers, *args: str, timeout: float = 60, env: dict | None = None) -> str:
    result = workers.run("--stop-when-empty", *args, timeout=timeout, env=env)
    assert result.returncode == 0, result.stderr
    return result.stderr


def test_success_deletes_the_job(store, workers):
    jobs.record.push("a")
    jobs.async_record.push("b")
    jobs.record.push_many([("c",), {"value": "d"}])
    drain(workers)
    assert kinds("record") == [("a", 1), ("c", 1), ("d", 1)]
    assert kinds("async") == [("b", 1)]
    assert all(c.total == 0 for c in store.counts().values())
    assert FailedJob.objects.count() == 0


def test_exception_retries_after_backoff_then_succeeds(store, workers):
    jobs.flaky.push("f", succeed_on=3)
    drain(workers)
    assert kinds("flaky-attempt") == [("f", 1), ("f", 2), ("f", 3)]
    assert kinds("flaky-ok") == [("f", 3)]
    assert [v for v, _ in kinds("signal-retrying")] == ["tests.flaky|0", "tests.flaky|0"]


def test_exception_past_tries_fails_with_traceback_and_signal(store, workers):
    pushed = jobs.always_broken.push("z")
    drain(workers)
    assert kinds("broken") == [("z", 1), ("z", 2)]
    row = FailedJob.objects.get()
    assert row.error_summary == "ValueError: broken z"
    assert "Traceback (most recent call last)" in row.error and "raise ValueError" in row.error
    assert (row.attempts, row.job_id, row.name) == (2, pushed.id, "tests.always_broken")
    (signal_value, attempts), = kinds("signal-failed")
    payload = '{"args":["z"],"kwargs":{}}'
    assert signal_value == f"{pushed.id}|tests.always_broken|default|2|{payload}"
    assert attempts == 2


def test_backoff_delays_the_next_attempt(store, workers):
    jobs.retry_explicit.push("r", delay=30)
    drain(workers)
    assert kinds("retry-explicit") == [("r", 1)]
    counts = store.counts()["default"]
    assert (counts.delayed, counts.pending) == (1, 0)
    jobs.retry_explicit.push("s", delay=None)  # backoff [0]: due at once
    drain(workers)
    assert kinds("retry-explicit") == [("r", 1), ("s", 1), ("s", 2)]


def test_fail_goes_to_the_failed_list_at_once(store, workers):
    jobs.fail_now.push("nobody")
    drain(workers)
    assert kinds("fail-now") == [("nobody", 1)]
    row = FailedJob.objects.get()
    assert row.error == "Fail: no such thing: nobody" and row.attempts == 1


def test_retry_window_keeps_retrying_past_tries(store, workers):
    proc = workers.start()
    jobs.record.push("ready")
    wait_for(lambda: kinds("record"))  # the worker is up: the window is not spent starting it
    jobs.windowed.push("w")
    wait_for(lambda: FailedJob.objects.exists(), timeout=30)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(20) == 0
    attempts = [a for _, a in kinds("windowed")]
    # tries=1, yet it ran again and again while the 3 s window lasted.
    assert len(attempts) >= 3 and attempts == list(range(1, len(attempts) + 1))
    assert FailedJob.objects.get().attempts == len(attempts)


def test_tries_zero_retries_until_it_succeeds(store, workers):
    jobs.unlimited.push("u", succeed_on=6)
    drain(workers)
    assert [a for _, a in kinds("unlimited")] == [1, 2, 3, 4, 5, 6]
    assert FailedJob.objects.count() == 0


def test_timeout_counts_as_a_failed_attempt(store, workers):
    jobs.slow.push(5)
    jobs.spin.push()
    drain(workers)
    assert kinds("slow-start") == [("5", 1)] and kinds("slow-end") == []
    errors = sorted(FailedJob.objects.values_list("name", "error"))
    assert [name for name, _ in errors] == ["tests.slow", "tests.spin"]
    for _, error in errors:
        assert error.startswith("JobTimeout: timed out after 0.5 s")


def _push_raw(store, name: str, payload: str) -> int:
    now = timezone.now()
    return store.push([NewJob(name=name, queue="default", payload=payload,
                              available_at=now, pushed_at=now)])[0]


def test_bad_payload_and_unknown_name_fail_at_once(store, workers):
    _push_raw(store, "tests.record", "{not json")
    _push_raw(store, "tests.record", '{"args": ["a", "b", "c"]}')
    _push_raw(store, "tests.nobody", '{"args": []}')
    jobs.record.push("after")
    drain(workers)
    assert kinds("record") == [("after", 1)]
    errors = list(FailedJob.objects.order_by("id").values_list("error", "attempts"))
    assert errors[0][0].startswith("payload does not decode: The payload is not valid JSON")
    assert errors[1][0].startswith("payload does not decode: Job 'tests.record' cannot be called")
    assert errors[2][0].startswith("unknown job: No job is named 'tests.nobody'")
    assert [a for _, a in errors] == [1, 1, 1]


def test_queues_drain_in_the_order_listed(store, workers):
    jobs.low.push("l")
    jobs.mail.push("m1")
    jobs.record.push("d")
    jobs.mail.push("m2")
    drain(workers, "--queue", "default", "--queue", "mail")
    kinds_run = list(Record.objects.order_by("id").values_list("kind", "value"))
    assert kinds_run == [("record", "d"), ("mail", "m1"), ("mail", "m2")]
    assert store.counts()["low"].pending == 1


def test_delayed_job_runs_when_due(store, workers):
    jobs.record.push_in(timedelta(seconds=1), "later")
    jobs.record.push("now")
    proc = workers.start("--max-seconds", "20")
    wait_for(lambda: kinds("record") == [("now", 1), ("later", 1)], timeout=20)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(20) == 0


def test_abandoned_claim_is_reclaimed_after_retry_after(store, workers):
    jobs.record.push("orphan")
    jobs.add.push(1, 2)
    # A worker that died holding claims: it claimed and never came back.
    ghost = store.claim(["default"], "ghost-worker", limit=2)
    drain(workers, env={"LATERITE_TEST_RETRY_AFTER": "60"})
    assert kinds("record") == []  # a live claim is left alone
    time.sleep(0.6)
    drain(workers, env={"LATERITE_TEST_RETRY_AFTER": "0.5"})
    assert kinds("record") == [("orphan", 2)]
    assert not store.delete(ghost)  # the dead worker's claim settles nothing


def test_reclaimed_job_past_its_tries_fails_without_running(store, workers):
    jobs.sleeper.push(0, "once")  # tries=1
    store.claim(["default"], "ghost-worker")
    time.sleep(0.6)
    drain(workers, env={"LATERITE_TEST_RETRY_AFTER": "0.5"})
    assert kinds("sleeper-start") == []
    error = FailedJob.objects.get().error
    assert error.startswith("worker lost: its claim expired after 0.5 s")
    assert "no tries left" in error


def test_heartbeat_keeps_a_long_job_claimed(store, workers):
    jobs.sleeper.push(3, "long")
    env = {"LATERITE_TEST_RETRY_AFTER": "1"}
    first = workers.start("--stop-when-empty", env=env)
    wait_for(lambda: kinds("sleeper-start"))
    second = workers.run("--stop-when-empty", "--max-seconds", "4", env=env)
    assert second.returncode == 0
    assert first.wait(20) == 0
    assert kinds("sleeper-start") == [("long", 1)] and kinds("sleeper-end") == [("long", 1)]
    assert FailedJob.objects.count() == 0


def test_sigterm_finishes_the_job_in_hand_and_exits_0(store, workers):
    jobs.sleeper.push(1.5, "in-hand")
    jobs.record.push("never")
    proc = workers.start()
    wait_for(lambda: kinds("sleeper-start"))
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(20) == 0
    assert kinds("sleeper-end") == [("in-hand", 1)]
    assert kinds("record") == []
    assert store.counts()["default"].pending == 1


def test_second_signal_stops_now_and_returns_the_job(store, workers):
    jobs.sleeper.push(30, "returned")
    proc = workers.start()
    wait_for(lambda: kinds("sleeper-start"))
    proc.send_signal(signal.SIGTERM)
    time.sleep(0.3)
    proc.send_signal(signal.SIGINT)
    assert proc.wait(20) == 0
    assert kinds("sleeper-end") == []
    claim = store.claim(["default"], "w")[0]
    # Handed back, not charged a try; the claim still counts: its next run is attempt 2.
    assert (claim.attempts, claim.tries_used) == (2, 1)


def test_limits_once_and_max_jobs(store, workers):
    jobs.record.push_many([(str(i),) for i in range(5)])
    assert workers.run("--once").returncode == 0
    assert len(kinds("record")) == 1
    assert workers.run("--max-jobs", "2").returncode == 0
    assert len(kinds("record")) == 3


@pytest.mark.slow
def test_several_workers_run_each_job_exactly_once(store, workers):
    total = 2000
    jobs.record.push_many([(str(i),) for i in range(total)])
    procs = [workers.start("--stop-when-empty", "--batch", "5") for _ in range(4)]
    for proc in procs:
        assert proc.wait(180) == 0, proc.stderr.read()
    values = [v for v, _ in kinds("record")]
    assert len(values) == total and set(values) == {str(i) for i in range(total)}
    assert len(set(Record.objects.values_list("pid", flat=True))) > 1


def test_sigkill_mid_job_loses_nothing(store, workers):
    jobs.patient.push(30, "killed")  # tries=3
    env = {"LATERITE_TEST_RETRY_AFTER": "1"}
    victim = workers.start(env=env)
    wait_for(lambda: kinds("patient-start"))
    victim.send_signal(signal.SIGKILL)
    victim.wait(10)
    # The job sits under a dead claim; after retry_after another worker takes it.
    assert store.counts()["default"].reserved == 1
    Record.objects.all().delete()
    jobs.record.push("after")
    time.sleep(1.5)  # past retry_after: the rescuer's first look finds the claim abandoned
    rescuer = workers.start(env=env)
    wait_for(lambda: kinds("patient-start"), timeout=30)
    rescuer.send_signal(signal.SIGINT)
    time.sleep(0.5)  # two signals sent at once may arrive as one
    rescuer.send_signal(signal.SIGINT)  # stop now: the job goes back, nothing lost
    assert rescuer.wait(20) == 0
    assert kinds("patient-start") == [("killed", 2)]
    # Returned to its queue, it kept its place in line, ahead of the job pushed after it.
    assert kinds("record") == []
    assert FailedJob.objects.count() == 0
    assert store.counts()["default"].pending == 2
