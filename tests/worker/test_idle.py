"""An idle worker on PostgreSQL waits for a notification and asks the database nothing;
whatever puts a job in line (a push, a delayed job's time, a job given back) wakes it."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.utils import timezone

from laterite_django.stores import get_store
from laterite_django.stores.database.sql import CHANNEL, IDLE_LOCK
from tests.conftest import Stderr, wait_for
from tests.testapp import jobs
from tests.testapp.models import Record


@pytest.fixture
def postgres_worker(workers, store_kind):
    if store_kind != "database" or connection.vendor != "postgresql":
        pytest.skip("LISTEN/NOTIFY: PostgreSQL only (LATERITE_TEST_DB=postgres)")
    proc = workers.start("--processes", "1", env={"LATERITE_TEST_LOG_LEVEL": "INFO"})
    stderr = Stderr(proc)
    jobs.record.push("first")
    wait_for(lambda: Record.objects.filter(value="first").exists())
    yield proc
    proc.terminate()
    proc.wait(timeout=30)
    assert proc.returncode == 0, stderr.text()


def last_query_of_other_sessions() -> tuple:
    """When each other session on the test database last started a query (LISTEN aside,
    and the heartbeat's write of the worker's entry in the live workers' list, which
    it makes every RETRY_AFTER / 3 seconds, idle or not: without it the worker would
    be listed as lost)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pid, query_start FROM pg_stat_activity WHERE datname = current_database() "
            "AND pid <> pg_backend_pid() AND query NOT LIKE 'LISTEN%%' "
            "AND query NOT LIKE '%%\"laterite_worker\"%%' ORDER BY pid")
        return tuple(cursor.fetchall())


def settled() -> bool:
    """Whether no other session started a query in the last 1.2 s."""
    before = last_query_of_other_sessions()
    time.sleep(1.2)
    return last_query_of_other_sessions() == before


def idle_lock_held() -> bool:
    """Whether a worker holds IDLE_LOCK (shared): it has gone idle."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted "
            "AND mode = 'ShareLock' AND ((classid::bigint << 32) | objid::bigint) = %s "
            "AND database = (SELECT oid FROM pg_database WHERE datname = current_database())",
            [IDLE_LOCK])
        return cursor.fetchone()[0] > 0


def latency_sampled_this_minute() -> bool:
    """Whether a worker's heartbeat took this minute's sample of the queues' latency
    (for the admin's overview: once a minute, by whichever worker comes first)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM laterite_minute_count WHERE latency IS NOT NULL "
                       "AND minute = date_trunc('minute', now())")
        return cursor.fetchone() is not None


def test_an_idle_worker_asks_postgres_nothing(postgres_worker):
    # Its once-a-minute latency sample aside: the test's window falls after this
    # minute's sample and before the next minute's.
    wait_for(latency_sampled_this_minute)
    if time.time() % 60 > 56:
        time.sleep(60.5 - time.time() % 60)
        wait_for(latency_sampled_this_minute)
    time.sleep(0.5)  # the job's deletion and the worker's first wait
    before = last_query_of_other_sessions()
    assert before, "the worker's session is not seen"
    time.sleep(2)  # 40 times LATERITE_QUEUE_POLL (0.05 s in the tests)
    assert last_query_of_other_sessions() == before


def test_an_idle_worker_asks_nothing_even_when_its_sweeps_fall_due(workers, store_kind):
    """With retry_after 3 s, a worker would sweep every second; idle and quiet (nothing
    claimed, nothing due), it neither sweeps nor claims. A delayed job pushed before
    it went quiet still runs at its time."""
    if store_kind != "database" or connection.vendor != "postgresql":
        pytest.skip("LISTEN/NOTIFY: PostgreSQL only (LATERITE_TEST_DB=postgres)")
    proc = workers.start("--processes", "1", env={"LATERITE_TEST_RETRY_AFTER": "3"})
    stderr = Stderr(proc)
    jobs.record.push("first")
    jobs.record.push_in(timedelta(seconds=12), "later")
    wait_for(lambda: Record.objects.filter(value="first").exists())
    # The job's deletion, a sweep, the look that finds it quiet (a look made while the
    # job was still claimed finds it busy: it looks again at its next wake-up, 1 s on).
    wait_for(settled, timeout=8)
    before = last_query_of_other_sessions()
    assert before, "the worker's session is not seen"
    time.sleep(3)  # three sweeps' worth
    assert last_query_of_other_sessions() == before
    wait_for(lambda: Record.objects.filter(value="later").exists(), timeout=20)
    proc.terminate()
    proc.wait(timeout=30)
    assert proc.returncode == 0, stderr.text()


def test_a_worker_not_quiet_still_asks_nothing_between_its_wake_ups(postgres_worker):
    """A job claimed elsewhere (its worker may die) keeps the idle worker from going
    quiet: it sweeps at each wake-up, 30 s apart, and asks nothing in between."""
    with transaction.atomic():  # pushed and claimed at once: the worker never gets it
        jobs.record.push("held elsewhere")
        assert len(get_store().claim(["default"], "elsewhere")) == 1
    time.sleep(1.0)  # woken by the push: it claimed nothing, looked, found it busy
    before = last_query_of_other_sessions()
    time.sleep(2)  # 40 times LATERITE_QUEUE_POLL (0.05 s in the tests)
    assert last_query_of_other_sessions() == before


def test_a_quiet_worker_still_returns_the_job_of_a_worker_that_died(workers, store):
    """A job of another queue, claimed after the worker went quiet again by a worker
    that then died (it never beats), comes back once retry_after has passed (every
    store): the claim wakes the quiet worker, which sweeps again."""
    proc = workers.start("--processes", "1", "--queue", "default",
                         env={"LATERITE_TEST_RETRY_AFTER": "3"})
    stderr = Stderr(proc)
    jobs.record.push("first")
    wait_for(lambda: Record.objects.filter(value="first").exists())
    time.sleep(2.5)  # idle, and quiet where the store can tell (Redis: after 1 s idle)
    jobs.record.enqueue(["abandoned"], {}, queue="mail")
    # The push woke the worker; it found nothing of its queues and nothing claimed,
    # and went quiet again before the claim.
    time.sleep(2.5)
    assert len(store.claim(["mail"], "a worker that died")) == 1
    assert store.counts()["mail"].running == 1
    wait_for(lambda: store.counts()["mail"].waiting == 1, timeout=20)
    assert store.counts()["mail"].running == 0
    proc.terminate()
    proc.wait(timeout=30)
    assert proc.returncode == 0, stderr.text()


def test_a_push_a_delayed_job_and_a_job_given_back_wake_it(postgres_worker):
    jobs.record.push("pushed")
    wait_for(lambda: Record.objects.filter(value="pushed").exists())

    jobs.record.push_in(timedelta(seconds=1), "delayed")
    wait_for(lambda: Record.objects.filter(value="delayed").exists())

    # A job claimed elsewhere, then given back (a worker stopping before it started):
    # pushed and claimed in one transaction, so the idle worker never gets it first.
    store = get_store()
    with transaction.atomic():
        jobs.record.push("given back")
        [claim] = store.claim(["default"], "elsewhere")
    time.sleep(0.3)  # the push's notification woke the worker: it found nothing
    assert store.release(claim, timezone.now(), "", uncharged=True)
    wait_for(lambda: Record.objects.filter(value="given back").exists(), timeout=10)


def test_an_idle_worker_still_leaves_at_its_max_seconds(workers, store):
    """Its long wait for a wake-up ends when --max-seconds is up (every store)."""
    started = time.monotonic()
    result = workers.run("--max-seconds", "1", timeout=60)
    assert result.returncode == 0, result.stderr
    assert time.monotonic() - started < 20  # the idle wait is 30 s; 1 s was asked


def test_a_worker_going_idle_while_a_push_is_uncommitted_runs_it_at_the_commit(postgres_worker):
    """The push took the idle lock first, so it did not notify: the worker, finding the
    lock taken, looks again until the push commits (its idle wait is 30 s)."""
    jobs.sleeper.push(1.0, "busy")
    wait_for(lambda: Record.objects.filter(kind="sleeper-start", value="busy").exists())
    with transaction.atomic():
        jobs.record.push("held")  # no worker waits: the push holds the idle lock
        wait_for(lambda: Record.objects.filter(kind="sleeper-end", value="busy").exists())
        time.sleep(1.0)  # the worker found nothing, and could not take the lock
    started = time.monotonic()
    wait_for(lambda: Record.objects.filter(value="held").exists(), timeout=10)
    assert time.monotonic() - started < 10


def _notified(listener, within: float) -> bool:
    return any(True for _ in listener.notifies(timeout=within, stop_after=1))


@pytest.mark.parametrize("many", [False, True], ids=["push", "push_many"])
def test_a_push_notifies_only_while_a_worker_waits(store, store_kind, many):
    """A worker waiting holds the idle lock, shared; with none holding it, nobody
    listens for the notification, and the push sends none."""
    if store_kind != "database" or connection.vendor != "postgresql":
        pytest.skip("LISTEN/NOTIFY: PostgreSQL only (LATERITE_TEST_DB=postgres)")
    import psycopg

    params = connection.get_connection_params()
    for unused in ("cursor_factory", "context", "prepare_threshold", "pool"):
        params.pop(unused, None)

    def push(value: str) -> None:
        if many:
            jobs.record.push_many([(value,), (value + "+",)])
        else:
            jobs.record.push(value)

    with psycopg.connect(**params, autocommit=True) as listener:
        listener.execute(f"LISTEN {CHANNEL}")
        push("nobody waits")
        assert not _notified(listener, 0.5)
        listener.execute("SELECT pg_advisory_lock_shared(%s)", [IDLE_LOCK])  # as a worker waits
        push("a worker waits")
        assert _notified(listener, 5)
        listener.execute("SELECT pg_advisory_unlock_shared(%s)", [IDLE_LOCK])
        push("it is busy again")
        assert not _notified(listener, 0.5)


def test_a_session_keeping_the_idle_lock_makes_workers_poll_not_hang(postgres_worker):
    """A session that kept the idle lock exclusive (a push cancelled between its try
    and its unlock) leaves workers looking every poll interval, never stuck."""
    import psycopg

    # Pushed once the worker waits, so the push's notification wakes it and it lets go
    # of the lock (a job it claims as it goes idle would run with the lock kept).
    wait_for(idle_lock_held)
    time.sleep(0.3)  # past the worker's one more claim: it waits for a notification
    jobs.sleeper.push(0.5, "busy")
    wait_for(lambda: Record.objects.filter(kind="sleeper-start", value="busy").exists())
    params = connection.get_connection_params()
    for unused in ("cursor_factory", "context", "prepare_threshold", "pool"):
        params.pop(unused, None)
    with psycopg.connect(**params, autocommit=True) as keeper:
        keeper.execute("SELECT pg_advisory_lock(%s)", [IDLE_LOCK])  # the busy worker let go
        wait_for(lambda: Record.objects.filter(kind="sleeper-end", value="busy").exists())
        time.sleep(0.5)  # the worker, idle, could not take the lock
        jobs.record.push("while kept")
        wait_for(lambda: Record.objects.filter(value="while kept").exists(), timeout=10)
