"""The Redis store's move to the failed list: one row per claim however often fail() is
repeated, handled rows that never bring their job back after a crash, and stored data
too long for the failed list's columns."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from django.db.models.signals import post_save
from django.utils import timezone

from laterite_django.models import FailedJob
from laterite_django.stores import NewJob, get_store
from laterite_django.stores.redis import RedisStore
from tests.conftest import redis_store_only
from tests.worker.test_redis_worker import own_redis  # noqa: F401 -- a fixture used below

__all__: list[str] = []

PREFIX = f"laterite-test-redisf-{os.getpid()}"


@pytest.fixture
def store_kind() -> Iterator[str]:
    """Only the Redis store here (the shared suites run every store)."""
    with redis_store_only(PREFIX) as kind:
        yield kind


def new(*, name="tests.record", queue="default", value="x"):
    now = timezone.now()
    return NewJob(name=name, queue=queue, payload=f'{{"args":["{value}"],"kwargs":{{}}}}',
                  available_at=now, pushed_at=now)


def sweep(store: RedisStore) -> int:
    """The workers' periodic sweep, as if every claim had stopped beating an hour ago."""
    return store.requeue_abandoned(-3600, "worker lost")


def everything_waiting(store: RedisStore) -> list:
    return store.claim(["default"], "w", limit=100)


class Crash(BaseException):
    """The worker process dying at this point (not an error any code catches)."""


def fail_and_crash_after_the_row(store: RedisStore, claim) -> FailedJob:
    """Run fail() until its row is written, then die before the job leaves Redis."""

    def die(sender, instance, created, **kwargs):
        raise Crash

    post_save.connect(die, sender=FailedJob, dispatch_uid="crash-after-row")
    try:
        with pytest.raises(Crash):
            store.fail(claim, "Fail: gone")
    finally:
        post_save.disconnect(sender=FailedJob, dispatch_uid="crash-after-row")
    return FailedJob.objects.latest("pk")


# -- a repeated fail() writes one row ------------------------------------------------


@pytest.mark.slow
def test_fail_repeated_after_redis_went_away_writes_one_row(own_redis, store_kind):  # noqa: F811
    """The row was written, then Redis went away before the job was removed: the worker
    calls fail() again once Redis is back; one row, and the job is gone."""
    server = own_redis(persist=True)
    store = get_store()
    store.push([new()])
    claim = store.claim(["default"], "w")[0]

    def redis_dies(sender, instance, created, **kwargs):
        server.kill()

    post_save.connect(redis_dies, sender=FailedJob, dispatch_uid="redis-dies")
    try:
        with pytest.raises(Exception, match=r"(?i)connect|closed"):
            store.fail(claim, "Fail: no")
    finally:
        post_save.disconnect(sender=FailedJob, dispatch_uid="redis-dies")
    server.start()
    first = FailedJob.objects.get()
    assert store.fail(claim, "Fail: no") == first.pk
    assert FailedJob.objects.count() == 1
    assert store.counts()["default"].total == 0
    # And once more, now that the job is gone: as for any claim no longer held.
    assert store.fail(claim, "Fail: no") is None
    assert FailedJob.objects.count() == 1


def test_a_repeat_fail_of_the_same_claim_returns_its_row(store):
    store.push([new()])
    claim = store.claim(["default"], "w")[0]
    row = fail_and_crash_after_the_row(store, claim)
    assert row.claim_token == f"{claim.id}:{claim.token}"
    assert store.fail(claim, "Fail: again") == row.pk
    assert FailedJob.objects.count() == 1 and FailedJob.objects.get().error == "Fail: gone"
    assert store.counts()["default"].total == 0
    assert sweep(store) == 0 and everything_waiting(store) == []


# -- a crash between the row and the removal, then the operator acts -----------------


def test_retry_before_the_sweep_leaves_exactly_one_job(store):
    store.push([new()])
    claim = store.claim(["default"], "w")[0]
    row = fail_and_crash_after_the_row(store, claim)
    assert store.retry([row.pk]) == 1
    assert sweep(store) == 0
    waiting = everything_waiting(store)
    assert len(waiting) == 1 and waiting[0].id != claim.id and waiting[0].attempts == 1
    assert FailedJob.objects.count() == 0


def test_forget_before_the_sweep_leaves_no_job(store):
    store.push([new()])
    claim = store.claim(["default"], "w")[0]
    row = fail_and_crash_after_the_row(store, claim)
    assert store.forget([row.pk]) == 1
    assert sweep(store) == 0
    assert everything_waiting(store) == []
    assert store.counts() == {}


def test_retry_and_forget_of_every_row_finish_every_pending_removal(store):
    store.push([new(value=str(i)) for i in range(4)])
    claims = store.claim(["default"], "w", limit=4)
    for claim in claims[:2]:
        fail_and_crash_after_the_row(store, claim)
    assert store.fail(claims[2], "Fail: whole") is not None
    assert store.retry() == 3
    for claim in claims[3:]:
        fail_and_crash_after_the_row(store, claim)
    assert store.forget() == 1
    assert sweep(store) == 0
    assert len(everything_waiting(store)) == 3


def test_a_crash_before_the_row_still_returns_the_job(store):
    """No row was written: the sweep gives the job back (nothing to retry or forget)."""
    store.push([new()])
    claim = store.claim(["default"], "w")[0]
    assert store._run("MARK_FAILING", [claim.id, claim.token]) == 1
    assert store.forget() == 0
    assert sweep(store) == 1
    assert [c.id for c in everything_waiting(store)] == [claim.id]


# -- stored data longer than the failed list's columns -------------------------------


def test_fail_keeps_an_over_long_name_and_queue_by_truncating_them(store):
    name, queue = "n" * 250, "q" * 120
    store.push([new(name=name, queue=queue)])
    claim = store.claim([queue], "w")[0]
    failed_id = store.fail(claim, "JobNotRegistered: no such job")
    row = FailedJob.objects.get(pk=failed_id)
    assert (row.name, row.queue) == (name[:200], queue[:100])
    assert row.error_summary == "JobNotRegistered: no such job"
    assert f"name was {name!r} (250 characters)" in row.error
    assert f"queue was {queue!r} (120 characters)" in row.error
    # The job left Redis; the failed list counts it under the queue name it keeps.
    assert sweep(store) == 0 and store.claim([queue], "w") == []
    assert queue not in store.counts() and store.counts()[queue[:100]].failed == 1


# -- a cancel that dies half-way --------------------------------------------------


class FailedListLocked:
    """Another connection holding the failed list's table locked (a real database
    fault): a write to it waits (PostgreSQL) or waits and fails (SQLite).

    On PostgreSQL, a client killed while its write waits leaves its server process
    waiting (the server notices a dead client only when it next talks to it): that
    write would go through, and commit, once the lock is released. `__exit__` ends
    such server processes first, as the loss of the whole host would.
    """

    def __init__(self) -> None:
        from django.db import connection

        self.vendor = connection.vendor
        self.settings = connection.settings_dict

    def __enter__(self) -> FailedListLocked:
        if self.vendor == "postgresql":
            import psycopg

            s = self.settings
            self.conn = psycopg.connect(host=s["HOST"], port=s["PORT"] or 5432, user=s["USER"],
                                        dbname=s["NAME"], password=s["PASSWORD"] or None)
            self.conn.execute(f"LOCK TABLE {FailedJob._meta.db_table} IN ACCESS EXCLUSIVE MODE")
        else:
            import sqlite3

            self.conn = sqlite3.connect(self.settings["NAME"], isolation_level=None)
            self.conn.execute("BEGIN IMMEDIATE")
        return self

    def __exit__(self, *exc: object) -> None:
        if self.vendor == "postgresql":
            self.conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid() "
                "AND wait_event_type = 'Lock' AND query ILIKE %s",
                [f"%{FailedJob._meta.db_table}%"])
        self.conn.rollback()
        self.conn.close()


def test_a_cancel_killed_between_redis_and_the_failed_list_loses_no_job(store, workers):
    import signal
    import subprocess
    import sys

    from tests.conftest import ROOT, wait_for
    from tests.testapp.models import Record
    from tests.worker.test_redis_worker import QUICK

    job_id = store.push([new(value="cancel me")])[0]
    with FailedListLocked():
        proc = subprocess.Popen([sys.executable, "-m", "django", "queue_cancel", str(job_id)],
                                cwd=ROOT, env=workers.env(), stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        try:
            # The job has left its queue in Redis; its row waits for the lock. Kill -9.
            ready = store.key("queue", "default", "ready")
            wait_for(lambda: store.client.zcard(ready) == 0, timeout=30)
            proc.send_signal(signal.SIGKILL)
        finally:
            proc.wait(30)
    assert not FailedJob.objects.exists()
    # A worker's sweep finds the half-done cancel and finishes it: failed, not run.
    worker = workers.start(env=QUICK)
    failed = wait_for(lambda: FailedJob.objects.filter(job_id=job_id).first(), timeout=60)
    assert failed.error.startswith("Cancelled: before it ran")
    assert failed.payload == new(value="cancel me").payload
    worker.terminate()
    worker.wait(30)
    assert not Record.objects.filter(value="cancel me").exists()
    assert FailedJob.objects.count() == 1
    counts = store.counts().get("default")
    assert counts is None or counts.total == 0
