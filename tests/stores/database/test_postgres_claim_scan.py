"""What a claim reads on PostgreSQL: the due jobs it takes and a few index entries more,
however many jobs wait for later in the same queue (pushed with push_in / push_at), at
whatever priorities; the limited claims too. Counted from the server's statistics, not
timed."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.db import connection
from django.test import override_settings
from django.utils import timezone

from laterite_django.stores import NewJob

__all__: list[str] = []

pytestmark = pytest.mark.parametrize("store_kind", ["database"], indirect=True)

LATER = 5000  # jobs delayed to tomorrow


def new(at, priority=0, key=None, value="x") -> NewJob:
    job = NewJob(name="tests.record", queue="default", pushed_at=timezone.now(),
                 payload=json.dumps({"args": [value], "kwargs": {}}), available_at=at,
                 priority=priority)
    if key is not None:
        job.concurrency_key, job.concurrency_limit = key, 1
    return job


def rows_read() -> int:
    """Rows and index entries this session has read from the job table so far."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_force_next_flush()")
        cursor.execute(
            "SELECT COALESCE(seq_tup_read, 0) + COALESCE(idx_tup_fetch, 0) "
            "+ (SELECT COALESCE(sum(idx_tup_read), 0) FROM pg_stat_user_indexes "
            "WHERE relid = 'laterite_job'::regclass) "
            "FROM pg_stat_user_tables WHERE relid = 'laterite_job'::regclass")
        return int(cursor.fetchone()[0])


def fill(store, now, keyed=False):
    """LATER jobs for tomorrow at two priorities, then three due ones (`keyed`: each job
    with a concurrency key of its own)."""
    tomorrow = now + timedelta(days=1)
    store.push([new(tomorrow, priority=i % 2 * 5, key=f"later-{i}" if keyed else None)
                for i in range(LATER)])
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE laterite_job")  # the planner knows most jobs wait for later
    store.push([new(now, priority=p, key=f"key-{value}" if keyed else None, value=value)
                for p, value in ((0, "old"), (5, "urgent"), (0, "young"))])


def claim_values(store, limit):
    """Claim up to `limit` jobs of "default"; their values, in the order claimed."""
    return [json.loads(c.payload)["args"][0] for c in store.claim(["default"], "w", limit)]


def test_a_claim_reads_no_job_delayed_to_later(pg_store):
    fill(pg_store, timezone.now() - timedelta(seconds=1))
    before = rows_read()
    assert claim_values(pg_store, 2) == ["urgent", "old"]
    assert claim_values(pg_store, 5) == ["young"]
    assert claim_values(pg_store, 5) == []
    assert rows_read() - before < 100


@override_settings(LATERITE_QUEUE_LIMITS={"default": {"concurrency": 50}})
def test_a_queue_limited_claim_reads_no_job_delayed_to_later(pg_store):
    fill(pg_store, timezone.now() - timedelta(seconds=1))
    before = rows_read()
    assert claim_values(pg_store, 2) == ["urgent", "old"]
    assert claim_values(pg_store, 5) == ["young"]
    assert rows_read() - before < 200


@pytest.fixture
def keyed_claims():
    """Every claim of this process the keyed one, as where a job declares `concurrency`."""
    from laterite_django.flow import limits

    limits.note_limited_task("tests.stores.test_pg_claim_scan")
    yield
    limits.limited_tasks.discard("tests.stores.test_pg_claim_scan")


def test_a_keyed_claim_reads_no_job_delayed_to_later(pg_store, keyed_claims):
    fill(pg_store, timezone.now() - timedelta(seconds=1), keyed=True)
    before = rows_read()
    assert claim_values(pg_store, 2) == ["urgent", "old"]
    assert claim_values(pg_store, 5) == ["young"]
    assert rows_read() - before < 200



def scans(plan: dict) -> set[tuple[str, str]]:
    """(node type, relation) of every scan in an EXPLAIN (FORMAT JSON) plan."""
    found = {(plan["Node Type"], plan["Relation Name"])} if "Relation Name" in plan else set()
    for child in plan.get("Plans", ()):
        found |= scans(child)
    return found


@pytest.mark.parametrize("finished", [False, True], ids=["claim", "settle-and-claim"])
def test_a_claim_never_reads_the_whole_table_whatever_its_statistics_say(pg_store, finished):
    from laterite_django.stores.database import postgres

    # The statistics say the table is empty (as after a clear, or on a new table), and
    # a drain has left 10,000 dead rows that no VACUUM has removed yet: joined to the
    # picked rows by id, the claim hashed them and read every page of the table.
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE laterite_job")
    now = timezone.now() - timedelta(seconds=1)
    pg_store.push([new(now, value=str(i)) for i in range(10_000)])
    while claims := pg_store.claim(["default"], "w", 1000):
        pg_store.delete(claims)
    pg_store.push([new(now, value=value) for value in ("a", "b", "c")])
    done = pg_store.claim(["default"], "w", 1) if finished else []
    ((statement, params),) = postgres.claim(done, "t", now, "w", ["default"], 5)
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN (FORMAT JSON) " + statement, params)
        (plan,) = cursor.fetchone()[0]
    read = scans(plan["Plan"])
    assert ("Tid Scan", "laterite_job") in read
    assert ("Seq Scan", "laterite_job") not in read
    assert sorted(claim_values(pg_store, 5)) == ["a", "b", "c"][finished:]
