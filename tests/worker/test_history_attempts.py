"""Each attempt of a job in its history record (LATERITE_QUEUE_HISTORY), on every store:
an attempt that fails and is retried is kept with its job (attempt_log, written by the
settle of the retry) and its record holds them all with its last, bounded to the first
KEEP_FIRST and last KEEP_LAST; nothing is kept while history is off."""

from __future__ import annotations

import json
import socket
import time
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.test import override_settings

from laterite_django import JobContext, job
from laterite_django.core.history import ERROR_CHARS, KEEP_FIRST, KEEP_LAST
from laterite_django.models import Job, JobRecord
from laterite_django.testing import run_jobs
from tests.testapp import jobs

HISTORY = {"keep": "7d"}


@job("tests.enc.flaky_quoting", encrypt=True, tries=3, backoff=0)
def flaky_quoting(email: str, cx: JobContext, token: str = "") -> None:
    """Fail twice quoting its arguments (scrubbed by the worker), then succeed."""
    if cx.attempt < 3:
        raise ValueError(f"cannot reach {email!r} with {token}")


def records() -> dict[int, JobRecord]:
    return {r.job_id: r for r in JobRecord.objects.all()}


def kept_log(store, job_id: int) -> list | None:
    """The attempt log the store keeps with a waiting job (None: none)."""
    if hasattr(store, "client"):  # Redis: a field of the job's hash
        raw = store.client.hget(f"{store.prefix}:job:{job_id}", "attempt_log")
        return None if raw is None else json.loads(raw)
    return Job.objects.get(pk=job_id).attempt_log


def test_a_job_that_fails_twice_then_succeeds_records_three_attempts(store, workers):
    """Real worker subprocesses: each attempt's number, start, end, worker and error,
    in order; the admin's view and queue_history --json show them."""
    flaky = jobs.flaky.push("thrice", 3).id
    result = workers.run("--stop-when-empty", timeout=60,
                         env={"LATERITE_TEST_HISTORY": json.dumps(HISTORY)})
    assert result.returncode == 0, result.stderr
    record = records()[flaky]
    assert (record.status, record.attempts, record.error) == ("succeeded", 3, "")
    log = record.attempt_log
    assert [entry["attempt"] for entry in log] == [1, 2, 3]
    assert "RuntimeError" in log[0]["error"] and "flaky attempt 1" in log[0]["error"]
    assert "flaky attempt 2" in log[1]["error"] and "flaky attempt 1" not in log[1]["error"]
    assert log[2]["error"] == ""
    host = f"{socket.gethostname()}:"
    assert all(entry["worker"].startswith(host) for entry in log)
    assert log[2]["worker"] == record.worker
    for entry in log:
        assert entry["started"] <= entry["ended"]
    assert log[0]["ended"] <= log[1]["started"] <= log[1]["ended"] <= log[2]["started"]
    assert log[2]["started"] == pytest.approx(record.started_at.timestamp(), abs=1e-3)

    attempts = record.attempt_list  # with datetimes
    assert [a["attempt"] for a in attempts] == [1, 2, 3]
    assert attempts[2]["ended"] - attempts[0]["started"] < timedelta(seconds=60)

    out = StringIO()
    with override_settings(LATERITE_QUEUE_HISTORY=HISTORY):
        call_command("queue_history", "--json", stdout=out)
    shown = {r["job_id"]: r for r in json.loads(out.getvalue())}[flaky]["attempt_log"]
    assert [a["attempt"] for a in shown] == [1, 2, 3]
    assert "flaky attempt 2" in shown[1]["error"]
    assert shown[0]["started"].endswith("+00:00")  # ISO 8601


def test_a_job_failed_for_good_records_each_attempt(store, workers):
    broken = jobs.always_broken.push("twice").id  # tries=2
    result = workers.run("--stop-when-empty", timeout=60,
                         env={"LATERITE_TEST_HISTORY": json.dumps(HISTORY)})
    assert result.returncode == 0, result.stderr
    record = records()[broken]
    assert (record.status, record.attempts) == ("failed", 2)
    assert [entry["attempt"] for entry in record.attempt_log] == [1, 2]
    assert all("broken twice" in entry["error"] for entry in record.attempt_log)
    assert record.attempt_log[1]["worker"] == record.worker


def test_a_job_that_ran_once_keeps_no_log(store):
    """The common case costs nothing: no log on the row nor in the record, its one
    attempt read from the record's columns."""
    with override_settings(LATERITE_QUEUE_HISTORY=HISTORY):
        done = jobs.add.push(1, 2).id
        run_jobs()
    record = records()[done]
    assert record.attempt_log is None
    (only,) = record.attempt_list
    assert (only["attempt"], only["worker"], only["error"]) == (1, record.worker, "")
    assert only["started"] == record.started_at and only["ended"] == record.finished_at


def test_nothing_is_kept_while_history_is_off_or_for_a_queue_without_it(store):
    off = jobs.flaky.push("off", 3).id
    with pytest.raises(RuntimeError):
        run_jobs(raise_errors=True)  # its first attempt fails: retried
    assert kept_log(store, off) is None
    with override_settings(LATERITE_QUEUE_HISTORY={"queues": {"mail": "1d"}}):
        with pytest.raises(RuntimeError):
            run_jobs(raise_errors=True)  # queue "default" keeps none
        assert kept_log(store, off) is None
        run_jobs()
    assert JobRecord.objects.count() == 0


def test_a_job_retried_many_times_keeps_the_first_and_last_attempts(store):
    """Released 15 times, its row keeps attempts 1-3 and 9-15 (bounded), and its record
    those with its last (16); an error longer than ERROR_CHARS is cut."""
    retries = 15
    with override_settings(LATERITE_QUEUE_HISTORY=HISTORY):
        job_id = jobs.add.push(1, 1).id
        for number in range(1, retries + 1):
            (claim,) = store.claim(["default"], f"host-{number}:1", 1)
            assert claim.attempts == number
            claim.started = time.time() - 0.5
            error = f"attempt {number} failed " + "x" * (ERROR_CHARS if number == 2 else 0)
            assert store.release(claim, timedelta(0), error)
        kept = kept_log(store, job_id)
        expected = [*range(1, KEEP_FIRST + 1), *range(retries - KEEP_LAST + 1, retries + 1)]
        assert [entry["attempt"] for entry in kept] == expected
        assert len(kept[1]["error"]) == ERROR_CHARS
        assert kept[0]["worker"] == "host-1:1" and kept[-1]["worker"] == f"host-{retries}:1"
        assert kept[-1]["error"] == f"attempt {retries} failed "
        (claim,) = store.claim(["default"], "host-last:1", 1)
        claim.started, claim.ended = time.time() - 1, time.time()
        assert store.delete([claim]) == 1
        run_jobs()  # Redis: the record moved to the database
    record = records()[job_id]
    assert [entry["attempt"] for entry in record.attempt_log] == [*expected, retries + 1]
    assert record.attempt_log[-1]["worker"] == "host-last:1"
    assert record.attempts == retries + 1


def test_a_job_given_back_or_snoozed_keeps_no_attempt(store):
    """Only a retry charged a try is an attempt that failed: a job given back unfinished
    (a worker stopping) keeps none."""
    with override_settings(LATERITE_QUEUE_HISTORY=HISTORY):
        job_id = jobs.add.push(2, 2).id
        (claim,) = store.claim(["default"], "host:1", 1)
        assert store.release(claim, timedelta(0), "stopped", uncharged=True)
        assert kept_log(store, job_id) is None


def test_encrypted_arguments_leak_into_no_attempt(store):
    email, token = "fay.private@example.com", "tok-attempt-5e2d"
    with override_settings(LATERITE_QUEUE_HISTORY=HISTORY):
        job_id = flaky_quoting.push(email, token=token).id
        with pytest.raises(ValueError):
            run_jobs(raise_errors=True)
        kept = kept_log(store, job_id)
        assert [entry["attempt"] for entry in kept] == [1]
        assert "[redacted]" in kept[0]["error"]
        assert email not in json.dumps(kept) and token not in json.dumps(kept)
        run_jobs()
    record = records()[job_id]
    assert [entry["attempt"] for entry in record.attempt_log] == [1, 2, 3]
    stored = json.dumps(record.attempt_log)
    assert "ValueError" in stored
    assert email not in stored and token not in stored


def test_an_attempt_whose_worker_died_is_logged_by_the_sweep(store):
    """The sweep that takes back an abandoned claim adds its attempt: its number and
    worker, no start nor end (not known), the sweep's reason as its error. A claim
    behind the head of its batch (it may never have started) adds none, nor does a job
    of a queue keeping no history."""
    with override_settings(LATERITE_QUEUE_HISTORY={"queues": {"default": "1d"}}):
        head = jobs.add.push(1, 1).id
        behind = jobs.add.push(2, 2).id
        elsewhere = jobs.mail.push("m").id
        assert len(store.claim(["default"], "host-dead:1", 2)) == 2
        assert len(store.claim(["mail"], "host-dead:1", 1)) == 1
        time.sleep(0.05)
        assert store.requeue_abandoned(0.0, "worker lost") == 3
        (lost,) = kept_log(store, head)
        assert lost == {"attempt": 1, "started": None, "ended": None,
                        "worker": "host-dead:1", "error": "worker lost"}
        assert kept_log(store, behind) is None
        assert kept_log(store, elsewhere) is None
        # Its next attempts: one fails, the next succeeds.
        claims = {c.id: c for c in store.claim(["default"], "host-2:2", 2)}
        claims[head].started = time.time()
        assert store.release(claims[head], timedelta(0), "second failed")
        assert store.delete([claims[behind]]) == 1
        (claim,) = store.claim(["default"], "host-3:3", 1)
        claim.started, claim.ended = time.time() - 0.1, time.time()
        assert store.delete([claim]) == 1
        run_jobs()  # Redis: the records moved to the database
    found = records()
    assert [(e["attempt"], e["worker"], e["error"]) for e in found[head].attempt_log] == [
        (1, "host-dead:1", "worker lost"), (2, "host-2:2", "second failed"), (3, "host-3:3", "")]
    # Attempt 1 of `behind` never started (behind the head): not an attempt of its log.
    assert found[behind].attempt_log is None


def test_a_job_cancelled_while_waiting_keeps_its_attempts(store):
    """Cancelled while it waits for its retry: its record holds the attempts its row
    kept (the cancel is no attempt of its own)."""
    with override_settings(LATERITE_QUEUE_HISTORY=HISTORY):
        job_id = jobs.flaky.push("cancel", 3).id
        with pytest.raises(RuntimeError):
            run_jobs(raise_errors=True)
        assert store.cancel([job_id]) == {job_id: "cancelled"}
    record = records()[job_id]
    assert record.status == "cancelled"
    assert [(e["attempt"], "flaky attempt 1" in e["error"]) for e in record.attempt_log] == [
        (1, True)]


def test_a_job_killed_by_the_supervisor_logs_each_attempt(store, workers):
    """With --processes, the supervisor settles a job whose worker process it killed
    past its timeout: each attempt logged with the start its process reported."""
    stuck = jobs.stuck_in_c.push(120).id  # timeout=0.5, tries=2: killed twice
    result = workers.run("--processes", "2", "--stop-when-empty", timeout=60,
                         env={"LATERITE_TEST_HISTORY": json.dumps(HISTORY)})
    assert result.returncode == 0, result.stderr
    record = records()[stuck]
    assert (record.status, record.attempts) == ("failed", 2)
    log = record.attempt_log
    assert [entry["attempt"] for entry in log] == [1, 2]
    assert all("was killed" in entry["error"] for entry in log)
    assert all(entry["started"] and entry["started"] <= entry["ended"] for entry in log)
    assert log[0]["ended"] - log[0]["started"] < 60  # not slept out
