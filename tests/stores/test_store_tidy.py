"""Store.tidy(): on PostgreSQL the workers vacuum the job table once dead rows pile up,
so a cleared backlog or a long run does not slow every claim; SQLite and Redis have
nothing to tidy."""

from __future__ import annotations

import time

import pytest
from django.db import connection
from django.utils import timezone

from laterite_django.stores import NewJob, reset_store
from laterite_django.stores.database import DatabaseStore
from laterite_django.stores.database import vacuum as vacuum_module
from tests.conftest import wait_for

__all__: list[str] = []


def jobs(count: int) -> list[NewJob]:
    now = timezone.now()
    return [NewJob(name="tests.record", queue="default", payload='{"args":["x"],"kwargs":{}}',
                   available_at=now, pushed_at=now) for _ in range(count)]


def job_table_stat(column: str) -> int:
    """One of the job table's statistics (pg_stat_user_tables), this session's flushed."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_force_next_flush()")
        cursor.execute(f"SELECT {column} FROM pg_stat_user_tables "
                       "WHERE relid = 'laterite_job'::regclass")
        return int(cursor.fetchone()[0])


def dead_rows() -> int:
    """The job table's dead rows, as the statistics the workers read say."""
    return job_table_stat("n_dead_tup")


def pile_up_dead_rows(store) -> int:
    """Push a backlog a little over the threshold and delete it, as the deletions of
    finished jobs do (no vacuum follows, unlike a big `clear`); return the dead rows."""
    store.push(jobs(vacuum_module.DEAD_ROWS + 2000))
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM laterite_job")
    return int(wait_for(lambda: (dead := dead_rows()) >= vacuum_module.DEAD_ROWS and dead))


def vacuums() -> int:
    """How many times the job table was vacuumed by hand (not by autovacuum)."""
    return job_table_stat("vacuum_count")


@pytest.fixture
def postgres_only(store_kind):
    if store_kind != "database" or connection.vendor != "postgresql":
        pytest.skip("dead rows pile up on PostgreSQL only (LATERITE_TEST_DB=postgres): "
                    "SQLite reuses deleted rows' space, Redis keeps no rows")


def test_tidy_with_nothing_piled_up_does_nothing(store):
    store.push(jobs(3))
    claims = store.claim(["default"], "w", limit=3)
    assert store.delete(claims) == 3
    assert store.tidy() == 0
    assert store.counts() == {}


def test_a_worker_vacuums_the_dead_rows_of_a_cleared_backlog(postgres_only, store, workers):
    dead = pile_up_dead_rows(store)
    result = workers.run("--stop-when-empty", env={"LATERITE_TEST_LOG_LEVEL": "INFO"})
    assert result.returncode == 0, result.stderr
    assert "Vacuumed the job table" in result.stderr
    assert dead_rows() < dead - vacuum_module.DEAD_ROWS


def test_a_big_clear_vacuums_the_table_before_it_returns(postgres_only, store):
    # What a clear leaves is known dead at once: the claims that follow it should not
    # step over a cleared backlog's entries until a worker's next look.
    store.push(jobs(vacuum_module.DEAD_ROWS + 2000))
    before, full = vacuums(), heap_pages()
    assert store.clear() == vacuum_module.DEAD_ROWS + 2000
    assert vacuums() == before + 1
    # The dead rows are gone, and with them the heap's emptied pages. (The statistics'
    # dead rows may still count the clear's deletions: a backend reports them lazily,
    # after the vacuum has reported its own count.)
    assert heap_pages() < full / 10


def test_a_clear_whose_vacuum_fails_still_clears(postgres_only, store, caplog, monkeypatch):
    from django.db import OperationalError

    def cancelled(*args):  # as a statement timeout cancels it
        raise OperationalError("canceling statement due to statement timeout")

    store.push(jobs(vacuum_module.DEAD_ROWS + 2000))
    before = vacuums()
    with monkeypatch.context() as patch:
        patch.setattr(vacuum_module.Vacuum, "_vacuum", cancelled)
        assert store.clear() == vacuum_module.DEAD_ROWS + 2000
    assert "Could not vacuum the job table after a clear" in caplog.text
    assert vacuums() == before
    assert store.counts() == {}
    assert store.tidy() >= vacuum_module.DEAD_ROWS  # the workers' look does it later


def test_a_small_clear_or_one_in_a_transaction_leaves_the_rows_to_the_workers(
    postgres_only, store,
):
    from django.db import transaction

    store.push(jobs(5))
    before = vacuums()
    assert store.clear() == 5
    store.push(jobs(vacuum_module.DEAD_ROWS + 2000))
    with transaction.atomic():  # VACUUM cannot run inside a transaction
        assert store.clear() == vacuum_module.DEAD_ROWS + 2000
    assert vacuums() == before
    assert store.tidy() >= vacuum_module.DEAD_ROWS  # the workers' look finds them


def test_no_vacuum_while_a_long_transaction_would_keep_the_rows(
    postgres_only, store, monkeypatch,
):
    import psycopg

    monkeypatch.setattr(vacuum_module, "LONG_TRANSACTION", 0.2)
    dead = pile_up_dead_rows(store)
    with psycopg.connect(**other_connection()) as other:
        other.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        other.execute("SELECT count(*) FROM laterite_job").fetchone()  # holds a snapshot
        time.sleep(0.5)
        assert store.tidy() == 0
        assert dead_rows() >= dead
        other.rollback()
    # It waits a while before it looks again...
    assert store.tidy() == 0
    # ...and a worker started later (a new store) vacuums them.
    reset_store()
    fresh = DatabaseStore()
    assert fresh.tidy() >= vacuum_module.DEAD_ROWS
    assert dead_rows() < vacuum_module.DEAD_ROWS


def test_one_worker_at_a_time_vacuums(postgres_only, store):
    import psycopg

    dead = pile_up_dead_rows(store)
    with psycopg.connect(**other_connection()) as other:
        # What a vacuum of the table holds while it runs (another worker's, autovacuum's).
        other.execute("LOCK TABLE laterite_job IN SHARE UPDATE EXCLUSIVE MODE")
        assert store.tidy() == 0
        assert dead_rows() >= dead
        other.rollback()
    assert store.tidy() >= vacuum_module.DEAD_ROWS  # the table is free again


def heap_pages() -> int:
    """The job table's heap, in pages."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_relation_size('laterite_job') "
                       "/ current_setting('block_size')::int")
        return int(cursor.fetchone()[0])


def other_connection() -> dict:
    """Connection parameters for a second session on the test database."""
    params = connection.get_connection_params()
    return {k: params[k] for k in ("host", "port", "user", "dbname") if params.get(k)}
