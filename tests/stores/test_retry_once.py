"""A retry from the failed list moves each job exactly once, whatever stops it before
its commit: the retrying process killed there (a web worker timed out during the
admin's Retry), or on Redis with LATERITE_QUEUE_REDIS_WAIT a push no replica confirmed.
A second retry of a row the first one left must not add a copy."""

from __future__ import annotations

import logging
import signal

import pytest
from django.test import override_settings
from django.utils import timezone

from laterite_django.core.crash_points import ENV
from laterite_django.models import FailedJob, OutboxJob
from laterite_django.stores import NewJob
from tests.stores.redis.test_failed import sweep

__all__: list[str] = []


def failed_row(store) -> FailedJob:
    """One job pushed, claimed and moved to the failed list; its row."""
    now = timezone.now()
    store.push([NewJob(name="tests.record", queue="default",
                       payload='{"args":["again"],"kwargs":{}}', available_at=now, pushed_at=now)])
    claim = store.claim(["default"], "w")[0]
    assert store.fail(claim, "Fail: not yet") is not None
    return FailedJob.objects.get()


def waiting(store) -> int:
    counts = store.counts().get("default")
    return 0 if counts is None else counts.total


def redis_only(store_kind: str) -> None:
    if store_kind != "redis":
        pytest.skip("the database store pushes in the retry's own transaction")


def test_a_retry_killed_before_its_commit_moves_the_job_once(store, workers):
    """Killed with the rows' deletion not committed: nothing moved, the row stays; the
    next retry moves the job, once."""
    row = failed_row(store)
    killed = workers.command("queue_retry", str(row.pk), env={ENV: "failed.retry.after_push"})
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert list(FailedJob.objects.values_list("pk", flat=True)) == [row.pk]
    assert waiting(store) == 0
    assert OutboxJob.objects.count() == 0

    assert store.retry([row.pk]) == 1
    assert waiting(store) == 1
    assert not FailedJob.objects.exists()


def test_a_retry_killed_after_its_push_to_redis_moves_the_job_once(store, store_kind, workers):
    """Killed between the push to Redis and the commit of its outbox rows' deletion (the
    retry itself committed): the sweep moves the rows again, and Redis stores the job
    once all the same."""
    redis_only(store_kind)
    row = failed_row(store)
    killed = workers.command("queue_retry", str(row.pk), env={ENV: "push.outbox.after_redis_push"})
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert not FailedJob.objects.exists()
    assert OutboxJob.objects.count() == 1 and waiting(store) == 1

    assert sweep(store) == 0
    assert OutboxJob.objects.count() == 0 and waiting(store) == 1


def test_a_retry_no_replica_confirmed_moves_the_job_once(store, store_kind, caplog):
    """No replica here: every push waits for none and is not confirmed. The job is on the
    primary all the same, so the retry counts it as moved, says so in the log, and the
    row is gone: retrying it again adds no copy."""
    redis_only(store_kind)
    row = failed_row(store)
    with override_settings(LATERITE_QUEUE_REDIS_WAIT=0.05), \
            caplog.at_level(logging.WARNING, logger="laterite"):
        assert store.retry([row.pk]) == 1
        assert store.retry([row.pk]) == 0
        assert store.retry() == 0
    assert waiting(store) == 1
    assert not FailedJob.objects.exists() and OutboxJob.objects.count() == 0
    assert "no replica confirmed" in caplog.text


def test_queue_retry_no_replica_confirmed_exits_0_and_moves_the_job_once(
        store, store_kind, workers):
    """The command, run again as a script would run a command that failed: the first run
    moved the job and said so; the next finds no such failed job."""
    redis_only(store_kind)
    row = failed_row(store)
    env = {"LATERITE_TEST_REDIS_WAIT": "0.05"}
    first = workers.command("queue_retry", str(row.pk), env=env)
    assert first.returncode == 0, first.stderr
    assert "1 job put back" in first.stdout
    again = workers.command("queue_retry", str(row.pk), env=env)
    assert again.returncode == 1 and "No failed job has id" in again.stderr
    assert waiting(store) == 1


def test_queue_push_no_replica_confirmed_exits_0_with_a_warning(store, store_kind, workers):
    """The job is queued: the command says so, warns that no replica confirmed it, and
    exits 0, so a script does not run it again for a second copy."""
    redis_only(store_kind)
    pushed = workers.command("queue_push", "tests.record", "--payload",
                             '{"args": ["once"], "kwargs": {}}',
                             env={"LATERITE_TEST_REDIS_WAIT": "0.05"})
    assert pushed.returncode == 0, pushed.stderr
    assert "Pushed tests.record as job" in pushed.stdout
    assert "no replica confirmed" in pushed.stderr
    assert waiting(store) == 1
