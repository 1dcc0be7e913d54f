"""A store that cannot be reached raises StoreUnavailable from every method, naming the
store and where it is; one whose tables are missing raises StoreNotMigrated."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator

import pytest
from django.conf import settings
from django.db import connection, connections
from django.db.migrations.executor import MigrationExecutor
from django.db.utils import load_backend
from django.test import override_settings
from django.utils import timezone

from laterite_django.core.minutes import Minute
from laterite_django.core.workers import WorkerInfo
from laterite_django.exceptions import StoreNotMigrated, StoreUnavailable
from laterite_django.models import Job
from laterite_django.stores import Claim, NewJob, Store
from laterite_django.stores.database import DatabaseStore
from laterite_django.stores.redis import RedisStore
from laterite_django.stores.schedule_state import ScheduleFire

SECRET = "not-this-password"
PREFIX = f"laterite-test-errors-{os.getpid()}"


def calls(store: Store) -> dict[str, Callable[[], object]]:
    """One call of every public store method."""
    now = timezone.now()
    claim = Claim(id=1, name="tests.record", queue="default", payload="{}", attempts=1,
                  pushed_at=now, token="0" * 32)
    job = NewJob(name="tests.record", queue="default", payload="{}", available_at=now,
                 pushed_at=now)
    debounced = NewJob(name="tests.record", queue="default", payload="{}", available_at=now,
                       pushed_at=now, unique_key="k", delay=5.0, debounce=5.0)
    return {
        "push": lambda: store.push([job]),
        "push_debounced": lambda: store.push_debounced(debounced),
        "claim": lambda: store.claim(["default"], "w"),
        "settle_and_claim": lambda: store.settle_and_claim([claim], ["default"], "w"),
        "requeue_abandoned": lambda: store.requeue_abandoned(0, "worker lost"),
        "make_due": lambda: store.make_due([1]),
        "next_due": lambda: store.next_due(["default"]),
        "heartbeat": lambda: store.heartbeat([claim]),
        "delete": lambda: store.delete([claim]),
        "release": lambda: store.release(claim, now, "again"),
        "fail": lambda: store.fail(claim, "boom"),
        "counts": store.counts,
        "oldest_waiting": store.oldest_waiting,
        "save_progress": lambda: store.save_progress([(claim, "{}")]),
        "checkpoint": lambda: store.checkpoint(claim),
        "save_checkpoint": lambda: store.save_checkpoint(claim, "{}"),
        "running": store.running,
        "add_minutes": lambda: store.add_minutes([Minute("default", now, 1, 0)]),
        "minutes": lambda: store.minutes(now),
        "clear": store.clear,
        "ping": store.ping,
        "failed_counts": store.failed_counts,
        "retry": store.retry,
        "forget": store.forget,
        "push_on_commit": lambda: store.push_on_commit([job]),
        "failed_jobs": store.failed_jobs,
        "missing_failed": lambda: store.missing_failed([1]),
        "job_names": lambda: store.job_names(Job),
        "estimated_rows": lambda: store.estimated_rows(Job),
        "tidy": store.tidy,
        "schedule_states": lambda: store.schedule_states(["nightly"]),
        "add_schedules": lambda: store.add_schedules(["nightly"], now),
        "define_schedules": lambda: store.define_schedules({"nightly": "0"}, now),
        "remove_schedules": lambda: store.remove_schedules(["nightly"]),
        "fire_schedule": lambda: store.fire_schedule(ScheduleFire("nightly", now, job)),
        "pause_schedule": lambda: store.pause_schedule("nightly", True, now),
        "job_states": lambda: store.job_states([1]),
        "pause": lambda: store.pause(["default"]),
        "resume": lambda: store.resume(["default"]),
        "paused_queues": store.paused_queues,
        "cancel": lambda: store.cancel([1]),
        "cancel_requested": lambda: store.cancel_requested([claim]),
        "drop_batch": lambda: store.drop_batch(1),
        "warnings": store.warnings,
        "unclaimed_payloads": lambda: store.unclaimed_payloads(0, 10),
        "sample_payloads": lambda: store.sample_payloads(10),
        "replace_payloads": lambda: store.replace_payloads([(1, "{}", "{}")]),
        "failed_payloads": lambda: store.failed_payloads(0, 10),
        "replace_failed_payloads": lambda: store.replace_failed_payloads([(1, "{}", "{}")]),
        "beat_worker": lambda: store.beat_worker(WorkerInfo(
            id="h:1", name="h:1", host="h", pid=1, version="0", queues=["default"],
            concurrency=1, started_at=now)),
        "remove_worker": lambda: store.remove_worker("h:1"),
        "workers": store.workers,
        "held_sequences": store.held_sequences,
        "release_sequence": lambda: store.release_sequence("acct:1"),
        "fair_waiting": store.fair_waiting,
        "prune_fair_turns": store.prune_fair_turns,
        "sample_latency": lambda: store.sample_latency(now, ["default"]),
        "listed_history_payloads": lambda: store.listed_history_payloads(0, 10),
        "replace_listed_history_payloads": lambda: store.replace_listed_history_payloads(
            [(0, "{}", "{}")]),
        "sample_listed_history": lambda: store.sample_listed_history(10),
    }


# What the server is set to do is asked of Redis alone: the database stores have
# nothing to say (their warnings() asks nothing, so it cannot fail); nor do they list
# history records before writing them (P:history: queue_rekey's reads and writes).
REDIS_ONLY = {"warnings", "listed_history_payloads", "replace_listed_history_payloads",
              "sample_listed_history"}
DATABASE_METHODS = sorted(set(calls(DatabaseStore())) - REDIS_ONLY)
# The failed list and the admin's reads live in the database: they never touch Redis.
# A push inside atomic() goes to the outbox there; Redis down at commit is logged.
# (Redis keeps no dead rows, but its tidy prunes the fair turns: it asks Redis.)
DATABASE_ONLY = {"failed_counts", "retry", "forget", "failed_jobs", "missing_failed",
                 "job_names", "estimated_rows", "push_on_commit", "failed_payloads",
                 "replace_failed_payloads"}
REDIS_METHODS = sorted(
    {*calls(DatabaseStore()), "wait", "wait_and_claim", "queues"} - DATABASE_ONLY)


def test_every_store_method_is_covered():
    public = {name for name in dir(Store) if not name.startswith("_")}
    # flush() never raises: what it cannot finish waits for the next flush or sweep;
    # work_in_background() only notes that the worker manages its connections;
    # quiet() asks the store nothing (it says what the last wait found), nor does
    # joins_callers_transaction(); cursor_sender() may fail as it likes: its caller
    # (resumable.CursorWriter) then has the walk save its cursors itself.
    assert public - {"wait", "wait_and_claim", "close", "flush", "transactional_push",
                     "work_in_background", "quiet", "joins_callers_transaction",
                     "cursor_sender"} == {*DATABASE_METHODS, *REDIS_ONLY}


@contextlib.contextmanager
def database_alias(alias: str, **options: object) -> Iterator[str]:
    """Add a database alias for the duration of a test. Only its connection is made
    (the alias stays out of DATABASES, where the test runner would want to create
    a test database for it and forbid queries to it)."""
    configured = connections.configure_settings(
        {"default": dict(connections.settings["default"]), alias: dict(options)})[alias]
    connections[alias] = load_backend(configured["ENGINE"]).DatabaseWrapper(configured, alias)
    try:
        yield alias
    finally:
        with contextlib.suppress(Exception):
            connections[alias].close()
        del connections[alias]


def run_store_method(store: Store, method: str) -> None:
    if method == "wait":
        import threading

        store.wait(["default"], 0.1, threading.Event())
    elif method == "wait_and_claim":
        import threading

        store.wait_and_claim(["default"], "w", 1, 0.1, threading.Event(), fresh_within=0.1)
    elif method == "queues":
        store.queues()  # type: ignore[attr-defined]
    else:
        calls(store)[method]()


# -- the database store --------------------------------------------------------------


@pytest.fixture
def postgres_down(db) -> Iterator[DatabaseStore]:
    pytest.importorskip("psycopg")
    with database_alias(
        "laterite_down", ENGINE="django.db.backends.postgresql", HOST="127.0.0.1", PORT="1",
        NAME="laterite_down", USER="postgres", PASSWORD=SECRET,
    ) as alias:
        yield DatabaseStore(database=alias)


@pytest.mark.parametrize("method", DATABASE_METHODS)
def test_postgres_on_a_closed_port_is_unavailable(postgres_down, method):
    with pytest.raises(StoreUnavailable) as raised:
        run_store_method(postgres_down, method)
    message = str(raised.value)
    assert not isinstance(raised.value, StoreNotMigrated)
    assert "'laterite_down'" in message and "127.0.0.1:1" in message and "PostgreSQL" in message
    assert "Connection refused" in message
    assert SECRET not in message and "\n" not in message
    assert raised.value.__cause__ is not None


@pytest.fixture
def job_table_locked(transactional_db) -> Iterator[None]:
    """Another connection holds an exclusive lock on the job table (PostgreSQL only)."""
    if connection.vendor != "postgresql":
        pytest.skip("runs on PostgreSQL (LATERITE_TEST_DB=postgres)")
    import psycopg

    params = connection.get_connection_params()
    holder = psycopg.connect(**{key: params[key] for key in ("host", "port", "user", "dbname")
                                if params.get(key)})
    try:
        holder.execute(f'LOCK TABLE "{Job._meta.db_table}" IN ACCESS EXCLUSIVE MODE')
        yield
    finally:
        holder.rollback()
        holder.close()


@pytest.mark.parametrize(("timeout", "said"), [
    ("lock_timeout", "timed out waiting for a lock (lock_timeout)"),
    ("statement_timeout", "its statement was cancelled (statement_timeout"),
])
@pytest.mark.parametrize("method", ["counts", "push", "claim"])
def test_a_postgres_timeout_says_the_store_is_busy_not_unreachable(
        job_table_locked, timeout, said, method):
    options = {"options": f"-c {timeout}=200"}
    busy = {**connection.settings_dict, "OPTIONS": options}
    with database_alias("laterite_busy", **busy), pytest.raises(StoreUnavailable) as raised:
        run_store_method(DatabaseStore(database="laterite_busy"), method)
    message = str(raised.value)
    assert "cannot be reached" not in message
    assert message.startswith("The database store is reachable but busy: database "
                              "'laterite_busy' (PostgreSQL at ")
    assert said in message and "\n" not in message


def test_sqlite_file_that_cannot_be_opened_is_unavailable(db, tmp_path):
    path = tmp_path / "no-such-dir" / "queue.sqlite3"
    with database_alias("laterite_nofile", ENGINE="django.db.backends.sqlite3", NAME=str(path)):
        store = DatabaseStore(database="laterite_nofile")
        for method in ("claim", "ping", "counts"):
            with pytest.raises(StoreUnavailable, match="unable to open database file") as raised:
                run_store_method(store, method)
            assert str(path) in str(raised.value)


@pytest.fixture
def sqlite_empty(db, tmp_path) -> Iterator[str]:
    path = tmp_path / "empty.sqlite3"
    with database_alias("laterite_empty", ENGINE="django.db.backends.sqlite3", NAME=str(path)):
        yield "laterite_empty"


@pytest.fixture
def postgres_empty(db) -> Iterator[str]:
    """A fresh PostgreSQL database without laterite's tables, dropped afterwards."""
    if connection.vendor != "postgresql":
        pytest.skip("runs on PostgreSQL (LATERITE_TEST_DB=postgres)")
    import psycopg

    name = f"{connection.settings_dict['NAME']}_empty"[:63]
    params = connection.get_connection_params()
    admin = {key: params[key] for key in ("host", "port", "user") if params.get(key)}
    with psycopg.connect(**admin, dbname="postgres", autocommit=True) as server:
        server.execute(f'DROP DATABASE IF EXISTS "{name}"')
        server.execute(f'CREATE DATABASE "{name}"')
    try:
        with database_alias("laterite_empty", **{**connection.settings_dict, "NAME": name}):
            yield "laterite_empty"
    finally:
        with psycopg.connect(**admin, dbname="postgres", autocommit=True) as server:
            server.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(params=["sqlite", "postgres"])
def empty_database(request, db) -> str:
    return request.getfixturevalue(f"{request.param}_empty")


@pytest.mark.parametrize("method", DATABASE_METHODS)
def test_missing_tables_say_run_migrate(empty_database, method):
    if method == "estimated_rows" and connections[empty_database].vendor == "sqlite":
        # SQLite keeps no row estimate: the answer is None without a query.
        assert DatabaseStore(database=empty_database).estimated_rows(Job) is None
        return
    with pytest.raises(StoreNotMigrated) as raised:
        run_store_method(DatabaseStore(database=empty_database), method)
    message = str(raised.value)
    assert "python manage.py migrate" in message and f"'{empty_database}'" in message
    assert "\n" not in message


def test_a_missing_column_says_run_migrate(empty_database):
    """A database migrated to 0002 lacks the columns 0003 adds."""
    executor = MigrationExecutor(connections[empty_database])
    executor.migrate([("laterite_django", "0002_task_result")])
    store = DatabaseStore(database=empty_database)
    for method in ("push", "claim", "requeue_abandoned", "release"):
        with pytest.raises(StoreNotMigrated, match=r"python manage\.py migrate"):
            run_store_method(store, method)
    store.ping()  # the table is there: the store is reachable
    assert store.counts() == {}


# -- the Redis store -----------------------------------------------------------------


@pytest.fixture
def redis_down(db) -> Iterator[RedisStore]:
    down = {
        "BACKEND": "django_redis.cache.RedisCache",
        "LOCATION": "redis://127.0.0.1:1/0",
        "OPTIONS": {"PASSWORD": SECRET},
    }
    with override_settings(CACHES={**settings.CACHES, "laterite_down": down}):
        yield RedisStore(alias="laterite_down", prefix=PREFIX)


@pytest.mark.parametrize("method", REDIS_METHODS)
def test_redis_on_a_closed_port_is_unavailable(redis_down, method):
    with pytest.raises(StoreUnavailable) as raised:
        run_store_method(redis_down, method)
    message = str(raised.value)
    assert "'laterite_down'" in message and "127.0.0.1:1" in message and "redis" in message
    assert "refused" in message.lower()
    assert SECRET not in message and "\n" not in message


def test_redis_store_without_its_failed_list_table_says_run_migrate(sqlite_empty):
    store = RedisStore(database=sqlite_empty, alias="redis", prefix=PREFIX)
    with pytest.raises(StoreNotMigrated, match=r"python manage\.py migrate") as raised:
        store.counts()
    assert f"'{sqlite_empty}'" in str(raised.value)
