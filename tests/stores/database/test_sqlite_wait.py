"""How an idle worker's wait ends on SQLite: a commit by another connection that makes
a job due (PRAGMA data_version), and nothing else; woken by the kernel where it tells
of writes to the file (inotify), else looking every 20 ms: each test runs both ways."""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable, Iterator
from datetime import timedelta

import pytest
from django.db import connection, connections
from django.test import override_settings
from django.utils import timezone

from laterite_django.stores import get_store, reset_store
from laterite_django.stores.database import DatabaseStore
from laterite_django.stores.database import wait as database_wait
from tests.conftest import Workers
from tests.testapp import jobs

LONG = 30.0  # a wait that ends before this was ended by something, not its timeout


@pytest.fixture(params=["watched", "polled"])
def sqlite_store(request, transactional_db: None, monkeypatch) -> Iterator[DatabaseStore]:
    if connection.vendor != "sqlite":
        pytest.skip("SQLite's wake-up (LATERITE_TEST_DB=sqlite)")
    if request.param == "polled":  # as where the kernel cannot tell of writes
        monkeypatch.setattr(database_wait, "open_watch", lambda path: None)
    with override_settings(LATERITE_QUEUE_STORE="database"):
        reset_store()
        store = get_store()
        assert isinstance(store, DatabaseStore)
        try:
            yield store
        finally:
            store.close()
            reset_store()


def waited(store: DatabaseStore, timeout: float = LONG) -> float:
    """Seconds `store.wait()` took."""
    started = time.monotonic()
    store.wait(["default"], timeout, threading.Event())
    return time.monotonic() - started


def in_thread(action: Callable[[], object], after: float) -> threading.Thread:
    """Run `action` on a connection of its own, `after` seconds from now."""

    def run() -> None:
        try:
            time.sleep(after)
            action()
        finally:
            connections.close_all()

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def test_a_push_by_another_process_ends_the_wait(sqlite_store):
    waited(sqlite_store, 0.05)  # the waiter is open and has seen the file as it is
    push = Workers("database")
    done: dict[str, int] = {}

    def push_from_a_process() -> None:
        payload = json.dumps({"args": ["elsewhere"], "kwargs": {}})
        done["rc"] = push.command("queue_push", "tests.record", "--payload", payload).returncode

    thread = in_thread(push_from_a_process, after=0.2)
    assert waited(sqlite_store) < LONG
    thread.join(60)
    assert done == {"rc": 0}
    assert sqlite_store.counts()["default"].waiting == 1


def test_a_job_pushed_before_the_wait_ends_it_at_once(sqlite_store):
    # The worker's claim found nothing, then a push landed before it began to wait.
    in_thread(lambda: jobs.record.push("between"), after=0).join(30)
    assert waited(sqlite_store) < LONG


def test_a_job_pushed_between_two_waits_ends_the_next(sqlite_store):
    waited(sqlite_store, 0.05)
    in_thread(lambda: jobs.record.push("between"), after=0).join(30)
    assert waited(sqlite_store) < LONG


def test_a_commit_that_makes_nothing_due_does_not_end_it(sqlite_store):
    waited(sqlite_store, 0.05)
    thread = in_thread(lambda: jobs.record.push_in(timedelta(hours=1), "later"), after=0.1)
    assert waited(sqlite_store, 1.0) >= 0.95
    thread.join(30)
    assert sqlite_store.counts()["default"].delayed == 1


def test_a_delayed_job_ends_the_wait_when_it_falls_due(sqlite_store):
    waited(sqlite_store, 0.05)
    due = timezone.now() + timedelta(seconds=0.5)
    in_thread(lambda: jobs.record.push_at(due, "soon"), after=0).join(30)
    assert waited(sqlite_store) < LONG
    assert timezone.now() >= due - timedelta(milliseconds=5)
    assert sqlite_store.claim(["default"], "w")


def test_a_job_on_another_queue_does_not_end_it(sqlite_store):
    waited(sqlite_store, 0.05)
    thread = in_thread(lambda: jobs.record.push("for default"), after=0.1)
    started = time.monotonic()
    sqlite_store.wait(["mail"], 1.0, threading.Event())  # the job is on "default"
    assert time.monotonic() - started >= 0.95
    thread.join(30)


def test_stop_ends_the_wait(sqlite_store):
    stop = threading.Event()
    thread = in_thread(stop.set, after=0.2)
    started = time.monotonic()
    sqlite_store.wait(["default"], LONG, stop)
    assert time.monotonic() - started < LONG
    thread.join(30)


def test_an_idle_wait_looks_only_when_the_database_is_written(sqlite_store, tmp_path):
    waited(sqlite_store, 0.05)
    waiter = sqlite_store._waiter()
    assert waiter is not None
    if not waiter.watched:
        pytest.skip("the polled waiter looks every 20 ms by design")
    # Other files of the directory are written all along: they are not the database.
    directory = connection.settings_dict["NAME"].rsplit("/", 1)[0]
    stop_writing = threading.Event()

    def write_beside() -> None:
        other = f"{directory}/beside-{tmp_path.name}.txt"
        try:
            while not stop_writing.wait(0.01):
                with open(other, "a") as f:
                    f.write("x")
        finally:
            os.remove(other)

    writer = threading.Thread(target=write_beside)
    writer.start()
    try:
        before = waiter.looks
        waited(sqlite_store, 2.5)
        # One look a second (WATCHED_LOOK_EVERY) and one at the end, not one every 20 ms.
        assert waiter.looks - before <= 4
        # A push still ends the wait.
        thread = in_thread(lambda: jobs.record.push("now"), after=0.2)
        assert waited(sqlite_store) < LONG
        thread.join(30)
    finally:
        stop_writing.set()
        writer.join(30)
