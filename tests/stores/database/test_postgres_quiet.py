"""A quiet worker on PostgreSQL (stores/database/wait.py, stores/database/postgres.py): it waits
without a sweep only while no job is claimed anywhere. Every claim that takes a job
while a worker is quiet wakes it, and a claim not yet committed when a worker looks
keeps it from going quiet, so a job whose worker dies is always swept in time."""

from __future__ import annotations

import threading
import time

import pytest
from django.db import connection, connections, transaction
from django.test import override_settings

from laterite_django.flow import limits as flow_limits
from laterite_django.stores.database import wait as database_wait
from laterite_django.stores.database.sql import CHANNEL, IDLE_LOCK, QUIET_LOCK
from tests.testapp import jobs

__all__: list[str] = []

pytestmark = pytest.mark.parametrize("store_kind", ["database"], indirect=True)


def listening():
    """A session of its own that listens on the workers' channel."""
    import psycopg

    params = connection.get_connection_params()
    for unused in ("cursor_factory", "context", "prepare_threshold", "pool"):
        params.pop(unused, None)
    listener = psycopg.connect(**params, autocommit=True)
    listener.execute(f"LISTEN {CHANNEL}")
    return listener


def notified(listener, within: float) -> bool:
    return any(True for _ in listener.notifies(timeout=within, stop_after=1))


def go_quiet(store, stop: threading.Event, longest: float = 0.2) -> None:
    """The waits of a worker that goes idle: it listens, takes the idle lock, looks."""
    for _ in range(3):
        store.wait(["default"], 0.05, stop, longest=longest)


@pytest.mark.parametrize("how", ["claim", "settle_and_claim", "queue_limit", "job_limit"])
def test_a_claim_notifies_only_while_a_worker_is_quiet(pg_store, monkeypatch, how):
    if how == "job_limit":  # the keyed claim, as when a job has a concurrency limit
        monkeypatch.setattr(flow_limits, "any_job_limited", lambda: True)
    limits = {"default": {"concurrency": 10}} if how == "queue_limit" else {}
    jobs.noop.push_many([(n,) for n in range(4)])  # no worker idle: no notification
    held = []

    def claim() -> list:
        finished = held[:] if how == "settle_and_claim" else []
        held[:] = pg_store.settle_and_claim(finished, ["default"], "w")
        return held

    with override_settings(LATERITE_QUEUE_LIMITS=limits), listening() as listener:
        assert len(claim()) == 1
        assert not notified(listener, 0.5)
        listener.execute("SELECT pg_advisory_lock_shared(%s)", [QUIET_LOCK])  # quiet
        assert len(claim()) == 1
        assert notified(listener, 5)
        listener.execute("SELECT pg_advisory_unlock_shared(%s)", [QUIET_LOCK])
        assert len(claim()) == 1
        assert not notified(listener, 0.5)
        listener.execute("SELECT pg_advisory_lock_shared(%s)", [QUIET_LOCK])
        assert pg_store.claim(["empty"], "w") == []  # took nothing: wakes no one
        assert not notified(listener, 0.5)


def test_a_claim_wakes_a_quiet_worker_and_it_looks_again(pg_store):
    stop = threading.Event()
    try:
        go_quiet(pg_store, stop)
        assert pg_store.quiet()
        jobs.noop.enqueue([1], {}, queue="mail")  # another queue's: it wakes, looks
        go_quiet(pg_store, stop)
        assert pg_store.quiet()
        assert len(pg_store.claim(["mail"], "a worker that may die")) == 1
        started = time.monotonic()
        pg_store.wait(["default"], 0.05, stop, longest=30)  # woken at once
        assert time.monotonic() - started < 10
        assert not pg_store.quiet()
        go_quiet(pg_store, stop)
        assert not pg_store.quiet()  # a job is claimed: a sweep may find it abandoned
    finally:
        pg_store.close()


def test_a_woken_quiet_worker_lets_go_of_its_locks_in_one_round_trip(pg_store):
    """Between the push's notification and the claim, the listener sends one statement:
    every round trip there is on the way from the push to the job."""
    stop = threading.Event()
    try:
        go_quiet(pg_store, stop)
        assert pg_store.quiet()
        listener = pg_store._local.listener
        # A bigint advisory lock's key is split in two: classid, its high half; objid.
        held = ("SELECT (classid::bigint << 32) | objid::bigint AS k FROM pg_locks "
                "WHERE locktype = 'advisory' AND pid = %s ORDER BY k")
        with connection.cursor() as cursor:
            cursor.execute(held, [listener.info.backend_pid])
            assert [row[0] for row in cursor.fetchall()] == sorted([IDLE_LOCK, QUIET_LOCK])
        sent: list[str] = []
        execute = listener.execute
        listener.execute = lambda query, *args: (sent.append(query), execute(query, *args))[1]
        jobs.noop.push(1)  # a worker waits: the push notifies
        pg_store.wait(["default"], 0.05, stop, longest=30)
        assert not pg_store.quiet()
        assert len(sent) == 1, sent
        with connection.cursor() as cursor:
            cursor.execute(held, [listener.info.backend_pid])
            assert cursor.fetchall() == []
    finally:
        pg_store.close()


def test_a_claim_uncommitted_as_a_worker_looks_keeps_it_from_quiet(pg_store):
    """The look cannot see a claim not yet committed, and that claim may have found no
    worker quiet: the worker waits for its commit before it goes quiet."""
    jobs.noop.enqueue([1], {}, queue="mail")
    found: list[bool] = []

    def worker() -> None:
        stop = threading.Event()
        try:
            go_quiet(pg_store, stop)
            found.append(pg_store.quiet())
        finally:
            pg_store.close()
            connections.close_all()

    with transaction.atomic():
        assert len(pg_store.claim(["mail"], "a worker that may die")) == 1
        thread = threading.Thread(target=worker)
        thread.start()
        thread.join(30)
    assert found == [False]


def test_a_quiet_spell_that_ends_is_followed_by_another_look(pg_store, monkeypatch):
    """At the end of its spell (QUIET_LONGEST at most) a worker looks again, and stays
    quiet if nothing changed: it does not go back to sweeping every poll."""
    monkeypatch.setattr(database_wait, "QUIET_LONGEST", 1.0)
    stop = threading.Event()
    try:
        go_quiet(pg_store, stop)
        assert pg_store.quiet()
        time.sleep(1.1)
        assert not pg_store.quiet()
        pg_store.wait(["default"], 0.05, stop, longest=0.2)
        assert pg_store.quiet()
    finally:
        pg_store.close()
