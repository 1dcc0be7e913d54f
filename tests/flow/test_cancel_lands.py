"""A cancel always lands, on every store: a running job's cancel outlives its worker's
death (SIGKILL, no supervisor) and a release for a retry, and a cancel that races a
release is never answered "finished" while the job runs again."""

from __future__ import annotations

import signal
import threading
import time
from datetime import timedelta

import pytest
from django.db import connection, connections, transaction
from django.utils import timezone

import laterite_django
from laterite_django.core.cancel import Outcome
from laterite_django.models import FailedJob
from tests.conftest import wait_for
from tests.testapp import jobs
from tests.testapp.models import Record

pytestmark = pytest.mark.django_db(transaction=True)

QUICK = {"LATERITE_TEST_RETRY_AFTER": "1"}


def starts(kind: str = "flow-start"):
    return Record.objects.filter(kind=kind)


def test_a_cancel_asked_before_its_worker_was_killed_lands_after_the_sweep(store, workers):
    """No supervisor: the sweep gives the dead worker's job back, and the worker that
    claims it next fails it as cancelled instead of running it again."""
    job_id = jobs.flow_stamp.push("killed", 30).id
    victim = workers.start("--processes", "1", env=QUICK)
    wait_for(lambda: starts().exists())
    assert laterite_django.cancel(job_id) == Outcome.ASKED
    victim.send_signal(signal.SIGKILL)
    victim.wait(10)
    time.sleep(1.5)  # past retry_after: the rescuer's first sweep finds the claim abandoned
    rescuer = workers.start("--processes", "1", env=QUICK)
    wait_for(lambda: FailedJob.objects.filter(job_id=job_id).exists() or starts().count() > 1)
    assert starts().count() == 1  # it never ran again
    failed = FailedJob.objects.get(job_id=job_id)
    assert failed.error.startswith("Cancelled: while it ran")
    assert "worker lost" in failed.error
    assert store.counts().get("default") is None or store.counts()["default"].total == 0
    rescuer.terminate()
    assert rescuer.wait(20) == 0


def test_a_job_released_after_its_cancel_was_asked_never_runs_again(store, workers):
    """A release that lands after the cancel (its worker looked for one just before)
    leaves the job waiting with the cancel pending: its next claim fails it."""
    job_id = jobs.record.push("released").id
    (claim,) = store.claim(["default"], "a worker about to retry it")
    assert laterite_django.cancel(job_id) == Outcome.ASKED
    assert store.release(claim, timezone.now(), "RuntimeError: boom")
    workers.run("--stop-when-empty")
    assert not Record.objects.filter(kind="record").exists()
    failed = FailedJob.objects.get(job_id=job_id)
    assert failed.error.startswith("Cancelled: while it ran")
    assert "RuntimeError: boom" in failed.error


def test_a_cancel_of_a_job_waiting_for_its_retry_removes_it(store, workers):
    job_id = jobs.record.push("delayed retry").id
    (claim,) = store.claim(["default"], "w")
    assert store.release(claim, timezone.now() + timedelta(hours=1), "RuntimeError: boom")
    assert laterite_django.cancel(job_id) == Outcome.CANCELLED
    assert FailedJob.objects.get(job_id=job_id).error.startswith("Cancelled: before it ran")
    assert store.counts().get("default") is None or store.counts()["default"].total == 0
    store.make_due([job_id])
    workers.run("--stop-when-empty")
    assert not Record.objects.filter(kind="record").exists()


def _waiting_on_a_lock() -> bool:
    with connections["default"].cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = "
                       "current_database() AND wait_event_type = 'Lock'")
        return cursor.fetchone()[0] > 0


def test_a_cancel_racing_a_release_lands(store, store_kind, workers):
    """The release commits while the cancel runs (on PostgreSQL, after the cancel's
    first statement and before its second: it waits on the released row): the cancel
    finds the job waiting and removes it, never "finished" with a retry to come.
    Redis runs each as one script (one before the other: see the test above)."""
    if store_kind != "database":
        pytest.skip("one script each on Redis: no statement between")
    job_id = jobs.record.push("raced").id
    (claim,) = store.claim(["default"], "w")
    released, go = threading.Event(), threading.Event()
    outcome: list[str] = []

    def release() -> None:
        try:
            with transaction.atomic():
                assert store.release(claim, timezone.now(), "RuntimeError: boom")
                released.set()
                go.wait(20)
        finally:
            connection.close()

    def cancel() -> None:
        try:
            outcome.append(laterite_django.cancel(job_id))
        finally:
            connection.close()

    releasing = threading.Thread(target=release)
    releasing.start()
    assert released.wait(20)
    cancelling = threading.Thread(target=cancel)
    cancelling.start()
    if connection.vendor == "postgresql":
        wait_for(_waiting_on_a_lock, timeout=20)
    else:
        time.sleep(0.5)  # SQLite: the cancel waits for the write lock (BEGIN IMMEDIATE)
    go.set()
    releasing.join(20)
    cancelling.join(20)
    assert outcome == [Outcome.CANCELLED]
    assert FailedJob.objects.get(job_id=job_id).error.startswith("Cancelled")
    workers.run("--stop-when-empty")
    assert not Record.objects.filter(kind="record").exists()


def test_the_rules_fail_a_claim_with_a_pending_cancel_without_running_it():
    from laterite_django.core.rules import Action, Decision, JobOptions, before_run
    from laterite_django.stores import Claim

    def claim(**fields) -> Claim:
        return Claim(id=1, name="j", queue="q", payload="[]", attempts=2,
                     pushed_at=timezone.now(), token="t", **fields)

    lost = "worker lost: its claim expired after 90 s without a heartbeat"
    assert before_run(claim(cancel_requested=True, last_error=lost), JobOptions()) == Decision(
        Action.FAIL, f"Cancelled: while it ran\n\n{lost}")
    assert before_run(claim(cancel_requested=True), JobOptions()) == Decision(
        Action.FAIL, "Cancelled: while it ran")
    assert before_run(claim(last_error=lost), JobOptions()) is None
    # A job of a cancelled batch is deleted, its end counted on the batch, as before.
    assert before_run(claim(cancel_requested=True), JobOptions(),
                      batch_cancelled=True).action is Action.DELETE
