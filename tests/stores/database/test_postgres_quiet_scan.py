"""What a PostgreSQL worker's statements outside the claim read, whatever the table's
statistics say: the look before it goes quiet (sql.BUSY: is any job claimed, does any
batch wait for its callbacks?), its heartbeat, the sweep that requeues abandoned jobs
and the look at when the next job is due. A few index entries each, never the whole
table. Read from the plan, not timed."""

from __future__ import annotations

import json
from datetime import timedelta

import psycopg
import pytest
from django.db import connection, transaction
from django.test import override_settings
from django.utils import timezone

from laterite_django.stores import NewJob
from laterite_django.stores.database import sql
from tests.stores.database.test_postgres_claim_scan import scans

__all__: list[str] = []

pytestmark = pytest.mark.parametrize("store_kind", ["database"], indirect=True)


def waiting(n: int, queue: str = "default") -> list[NewJob]:
    now = timezone.now() - timedelta(seconds=1)
    return [NewJob(name="tests.noop", queue=queue, pushed_at=now, available_at=now,
                   payload=json.dumps({"args": [i], "kwargs": {}})) for i in range(n)]


def stale_statistics(store, claimed: int, queue: str) -> None:
    """ANALYZE the job table while `claimed` of 100 jobs are claimed (0: the table is
    empty), then clear it and push 20,000 jobs into `queue` that nobody claims: the
    statistics no longer say what the table holds (autovacuum off, or behind)."""
    if claimed:
        store.push(waiting(100))
        assert len(store.claim(["default"], "w", claimed)) == claimed
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE laterite_job")
    store.clear()
    store.push(waiting(20_000, queue=queue))


def busy() -> bool:
    with connection.cursor() as cursor:
        cursor.execute(sql.BUSY)
        return bool(cursor.fetchone()[0])


@pytest.mark.parametrize("analyzed", ["empty", "all-claimed"])
def test_the_look_before_quiet_never_reads_the_whole_table(pg_store, analyzed):
    # The statistics say the table is empty (after a clear, on a new table), or that
    # every job is claimed (analyzed mid-drain); then a backlog arrives that nobody
    # claims. Read as EXISTS (... token IS NOT NULL), the planner expected a claimed
    # row on the first page and read all of them: 10-80 ms per look at 10^6 jobs,
    # each idle spell, in the way of the next push.
    stale_statistics(pg_store, 100 if analyzed == "all-claimed" else 0, queue="backlog")
    assert busy() is False
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN (FORMAT JSON) " + sql.BUSY)
        (plan,) = cursor.fetchone()[0]
    read = scans(plan["Plan"])
    assert ("Index Scan", "laterite_job") in read or ("Index Only Scan", "laterite_job") in read
    assert ("Seq Scan", "laterite_job") not in read, read
    # Still right: a claimed job makes the look busy.
    pg_store.push(waiting(1))
    pg_store.claim(["default"], "w", 1)
    assert busy() is True


@pytest.mark.parametrize("analyzed", ["empty", "all-claimed"])
def test_a_workers_periodic_statements_never_read_the_whole_table(pg_store, analyzed):
    from laterite_django.stores.database import postgres

    stale_statistics(pg_store, 100 if analyzed == "all-claimed" else 0, queue="backlog")
    statements = {
        "heartbeat": (sql.heartbeat(2, 1, postgres.NOW), [1, 2, "a" * 32]),
        "requeue": postgres.requeue_abandoned("lost", 90.0),
        "next_due": (sql.next_due(1), ["default"]),
    }
    found = {}
    with connection.cursor() as cursor:
        for name, (statement, params) in statements.items():
            cursor.execute("EXPLAIN (FORMAT JSON) " + statement, params)
            (plan,) = cursor.fetchone()[0]
            found[name] = scans(plan["Plan"])
    whole = {name for name, read in found.items() if ("Seq Scan", "laterite_job") in read}
    assert whole == set(), found


def test_a_limited_claim_is_never_compiled_by_jit(pg_store):
    # Statistics from a table where half the jobs were claimed, then a backlog: the
    # claim's generic plan was costed past jit_above_cost, and PostgreSQL compiled it at
    # every claim (about 30 ms of a claim that runs in under 1).
    from laterite_django.core.limits import QueueLimit
    from laterite_django.stores.database import postgres

    stale_statistics(pg_store, 50, queue="default")
    (settings, params), (claim, claim_params) = postgres.queue_limited_claim(
        [], "t", "w", ["default"], 100, {"default": QueueLimit(concurrency=50)})
    # The plan the claim runs with: generic (SETTINGS), from a prepared statement.
    with transaction.atomic():
        connection.ensure_connection()
        if connection.connection.prepare_threshold is None:  # as pg_hot.prepares does
            connection.connection.prepare_threshold = 2**62
        raw = psycopg.Cursor(connection.connection)  # server-side binding, as pg_hot
        raw.execute(settings, params)
        raw.execute(claim, claim_params, prepare=True)
        name, types = raw.execute("SELECT name, parameter_types::text[] "
                                  "FROM pg_prepared_statements "
                                  "WHERE statement LIKE 'WITH done AS %'").fetchone()
        marks = ", ".join(f"%s::{kind}" for kind in types)
        # A utility statement takes no bound parameters: the values go in its text.
        literal = psycopg.ClientCursor(connection.connection)
        literal.execute(f"EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE {name}({marks})", claim_params)
        (plan,) = literal.fetchone()[0]
        transaction.set_rollback(True)
    assert "JIT" not in plan, plan["JIT"]
    with override_settings(LATERITE_QUEUE_LIMITS={"default": {"concurrency": 50}}):
        assert len(pg_store.claim(["default"], "w", 100)) == 50
