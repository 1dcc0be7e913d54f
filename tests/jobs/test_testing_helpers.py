"""laterite_django.testing: run_jobs (inside TestCase too) and isolated_redis_prefix."""

from __future__ import annotations

import signal
import threading
from datetime import timedelta

import pytest
from asgiref.sync import sync_to_async
from django.db import connection, connections
from django.dispatch import receiver
from django.test import TestCase, override_settings

from laterite_django import Fail, JobContext, Retry, job
from laterite_django.models import FailedJob
from laterite_django.signals import job_failed
from laterite_django.stores import get_store
from laterite_django.testing import isolated_redis_prefix, run_jobs
from tests.conftest import flush_redis
from tests.testapp import jobs
from tests.testapp.models import Record

# -- jobs run in this process only (no worker subprocess imports this module) ----------

seen: list[object] = []


@job("helpers.count_records", tries=1)
def count_records(kind: str) -> int:
    """Record how many Records of `kind` the job sees: the test's uncommitted rows?"""
    seen.append(Record.objects.filter(kind=kind).count())
    return 0


@job("helpers.async_count_records", tries=1)
async def async_count_records(kind: str) -> None:
    seen.append(await Record.objects.filter(kind=kind).acount())
    await Record.objects.acreate(kind="async-wrote", value=kind)


@job("helpers.broken", tries=2, backoff=0)
def broken(value: str, cx: JobContext) -> None:
    Record.objects.create(kind="broken", value=value, attempt=cx.attempt)
    raise ValueError(f"broken {value}")


@job("helpers.retry_later", tries=3, backoff=1)
def retry_later(value: str, cx: JobContext) -> None:
    Record.objects.create(kind="retry-later", value=value, attempt=cx.attempt)
    if cx.attempt == 1:
        raise Retry("once more")


@job("helpers.give_up", tries=5)
def give_up(value: str) -> None:
    raise Fail(f"no {value}")


@job("helpers.sleepy", timeout=30, tries=1)
def sleepy() -> None:
    """Has a timeout, so running it arms the worker's SIGALRM handler."""


@job("helpers.push_on", tries=1)
def push_on(left: int) -> None:
    """Record `left`, then push itself with one less, down to 0."""
    Record.objects.create(kind="pushed-on", value=str(left))
    if left:
        push_on.push(left - 1)


def records(kind: str) -> list[tuple[str, int]]:
    return sorted(Record.objects.filter(kind=kind).values_list("value", "attempt"))


class RunJobsChecks:
    """run_jobs() inside a TestCase; the store comes from the subclass's settings."""

    def setUp(self) -> None:
        seen.clear()

    def test_runs_on_the_tests_connection_and_transaction(self) -> None:
        Record.objects.create(kind="mine", value="uncommitted")  # only this transaction sees it
        jobs.record.push("a")
        count_records.push("mine")
        handler = signal.getsignal(signal.SIGALRM)

        self.assertEqual(run_jobs(), 2)

        self.assertEqual(seen, [1])
        self.assertEqual(records("record"), [("a", 1)])
        self.assertIs(signal.getsignal(signal.SIGALRM), handler)  # none left behind
        self.assertEqual(get_store().counts(), {})
        self.assertEqual(run_jobs(), 0)
        self.assertTrue(connection.is_usable())
        self.assertTrue(connection.in_atomic_block)  # still the test's transaction

    def test_the_jobs_a_job_pushes_run_in_the_same_call(self) -> None:
        push_on.push(2)  # pushes push_on(1), which pushes push_on(0)

        self.assertEqual(run_jobs(), 3)

        self.assertEqual(sorted(Record.objects.filter(kind="pushed-on").values_list(
            "value", flat=True)), ["0", "1", "2"])
        self.assertEqual(get_store().counts(), {})
        self.assertEqual(run_jobs(), 0)

    def test_a_job_with_a_timeout_leaves_no_alarm_handler(self) -> None:
        handler = signal.getsignal(signal.SIGALRM)
        sleepy.push()
        self.assertEqual(run_jobs(), 1)
        self.assertIs(signal.getsignal(signal.SIGALRM), handler)

    def test_an_async_job_queries_on_the_tests_connection(self) -> None:
        Record.objects.create(kind="mine", value="uncommitted")
        async_count_records.push("mine")

        self.assertEqual(run_jobs(), 1)

        self.assertEqual(seen, [1])
        self.assertEqual(records("async-wrote"), [("mine", 0)])

    def test_failed_jobs_land_on_the_failed_list(self) -> None:
        failed: list[dict] = []

        @receiver(job_failed)
        def heard(sender: object, **kwargs: object) -> None:
            failed.append(kwargs)

        try:
            broken.push("x")
            give_up.push("y")
            # broken: attempt 1 is retried at once (backoff 0), attempt 2 fails.
            self.assertEqual(run_jobs(), 3)
        finally:
            job_failed.disconnect(heard)
        rows = {row.name: row for row in FailedJob.objects.all()}
        self.assertEqual(set(rows), {"helpers.broken", "helpers.give_up"})
        self.assertEqual(rows["helpers.broken"].attempts, 2)
        self.assertIn("ValueError: broken x", rows["helpers.broken"].error)
        self.assertEqual(rows["helpers.give_up"].error.splitlines()[0], "Fail: no y")
        self.assertEqual(sorted(f["name"] for f in failed), ["helpers.broken", "helpers.give_up"])
        self.assertEqual(records("broken"), [("x", 1), ("x", 2)])

    def test_raise_errors_raises_the_first_error_once_settled(self) -> None:
        broken.push("x")
        jobs.record.push("after")

        with self.assertRaisesMessage(ValueError, "broken x"):
            run_jobs(raise_errors=True)

        # That attempt was settled (retried: tries remain); nothing else ran.
        self.assertEqual(records("broken"), [("x", 1)])
        self.assertEqual(records("record"), [])
        self.assertEqual(get_store().counts()["default"].waiting, 2)
        # Due again now, behind "after": that one runs first, then the last attempt.
        with self.assertRaisesMessage(ValueError, "broken x"):
            run_jobs(raise_errors=True)
        self.assertEqual(records("record"), [("after", 1)])
        self.assertEqual(FailedJob.objects.get().name, "helpers.broken")
        self.assertEqual(get_store().counts()["default"].waiting, 0)
        self.assertEqual(run_jobs(raise_errors=True), 0)

        give_up.push("z")
        with self.assertRaisesMessage(Fail, "no z"):
            run_jobs(raise_errors=True)
        self.assertEqual(FailedJob.objects.filter(name="helpers.give_up").count(), 1)

    def test_wait_delayed_runs_retries_due_soon(self) -> None:
        retry_later.push("r")
        self.assertEqual(run_jobs(), 1)  # retried in 1 s: not due now
        self.assertEqual(get_store().counts()["default"].delayed, 1)

        self.assertEqual(run_jobs(wait_delayed=5), 1)

        self.assertEqual(records("retry-later"), [("r", 1), ("r", 2)])
        self.assertEqual(get_store().counts(), {})

    def test_wait_delayed_does_not_wait_beyond_its_bound(self) -> None:
        jobs.record.push_in(timedelta(hours=1), "later")
        self.assertEqual(run_jobs(wait_delayed=5), 0)
        self.assertEqual(get_store().counts()["default"].delayed, 1)

    def test_queues(self) -> None:
        jobs.record.push("d")
        jobs.mail.push("m")
        jobs.low.push("l")

        self.assertEqual(run_jobs("mail"), 1)
        self.assertEqual(records("mail"), [("m", 0)])
        self.assertEqual(run_jobs(["low", "default"]), 2)
        self.assertEqual(get_store().counts(), {})

    def test_bad_arguments_name_the_value(self) -> None:
        for bad in ("", 3, [], ["mail", ""]):
            with self.assertRaisesMessage(ValueError, repr(bad)):
                run_jobs(bad)  # type: ignore[arg-type]
        for bad in (-1, "5", True):
            with self.assertRaisesMessage(ValueError, f"got {bad!r}"):
                run_jobs(wait_delayed=bad)  # type: ignore[arg-type]

    async def test_from_an_async_test(self) -> None:
        await jobs.record.apush("from async")
        self.assertEqual(await sync_to_async(run_jobs)(), 1)
        self.assertEqual(await sync_to_async(records)("record"), [("from async", 1)])


class RunJobsOnTheDatabaseStore(RunJobsChecks, TestCase):
    """The database store, on SQLite or PostgreSQL (LATERITE_TEST_DB)."""

    def setUp(self) -> None:
        super().setUp()
        self.enterContext(override_settings(LATERITE_QUEUE_STORE="database"))


class RunJobsOnTheRedisStore(RunJobsChecks, TestCase):
    """The Redis store: pushes in the test's transaction wait in the outbox."""

    def setUp(self) -> None:
        super().setUp()
        self.enterContext(override_settings(LATERITE_QUEUE_STORE="redis"))
        self.prefix = self.enterContext(isolated_redis_prefix())

    def test_the_prefix_is_the_tests_own(self) -> None:
        self.assertEqual(get_store().prefix, self.prefix)
        self.assertTrue(self.prefix.startswith("laterite-test-test-"))


@override_settings(LATERITE_QUEUE_MODE="inline")
class InlineModeInTestCase(TestCase):
    """Inline mode runs at the push, on the test's connection, async jobs included."""

    def setUp(self) -> None:
        seen.clear()

    def test_an_async_job_sees_the_tests_data(self) -> None:
        Record.objects.create(kind="mine", value="uncommitted")
        self.assertEqual(async_count_records.push("mine").status, "ran")
        self.assertEqual(seen, [1])
        self.assertEqual(records("async-wrote"), [("mine", 0)])


@pytest.mark.parametrize("kind", ["database", "redis"])
def test_run_jobs_on_a_committed_database(kind, transactional_db):
    """Outside a TestCase (pushes committed at once) it runs the same way."""
    with override_settings(LATERITE_QUEUE_STORE=kind), isolated_redis_prefix():
        jobs.record.push("a")
        jobs.async_record.push("b")
        broken.push("c")
        assert run_jobs() == 4
        assert records("record") == [("a", 1)] and records("async") == [("b", 1)]
        assert FailedJob.objects.get().name == "helpers.broken"
        assert get_store().counts().keys() == {"default"}  # only the failed one
        assert connection.is_usable()


def test_run_jobs_from_another_thread(store):
    jobs.record.push("t")
    counted: list[int] = []
    def in_thread() -> None:
        try:
            counted.append(run_jobs())
        finally:
            connections.close_all()  # this thread's own connection

    thread = threading.Thread(target=in_thread)
    thread.start()
    thread.join(30)
    assert counted == [1] and records("record") == [("t", 1)]


@override_settings(LATERITE_QUEUE_MODE="inline")
def test_run_jobs_in_inline_mode_finds_nothing_to_run(db):
    assert jobs.record.push("now").status == "ran"
    assert run_jobs() == 0


def test_isolated_redis_prefix_deletes_its_keys(transactional_db):
    from django_redis import get_redis_connection

    client = get_redis_connection("redis", write=True)
    with override_settings(LATERITE_QUEUE_STORE="redis"):
        configured = get_store().prefix
        with isolated_redis_prefix() as prefix:
            assert get_store().prefix == prefix
            jobs.record.push_in(timedelta(hours=1), "kept until the end")
            assert list(client.scan_iter(match=f"{prefix}:*"))
        assert not list(client.scan_iter(match=f"{prefix}:*"))
        assert get_store().prefix == configured != prefix
        with isolated_redis_prefix("laterite-test-chosen") as chosen:
            assert chosen == "laterite-test-chosen"
            jobs.record.push("x")
        assert not list(client.scan_iter(match="laterite-test-chosen:*"))
    flush_redis("laterite-test-chosen")
