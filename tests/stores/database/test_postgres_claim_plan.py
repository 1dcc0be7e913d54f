"""A claim on PostgreSQL (stores/database/postgres.run_planned): outside a transaction its
statement runs by name after the claim's settings, in one round trip, so the server
plans it once per connection instead of at every claim; that plan reaches the job
table through its indexes even when made on an empty table; the settings end with
the claim's transaction; and the claim still runs when its prepared statement was
dropped, inside the caller's transaction, and on queues whose names need quoting. The
deletion of finished jobs reaches their rows through the primary key, whatever the
table's statistics."""

from __future__ import annotations

import json

import pytest
from django.db import connection, transaction
from django.test import override_settings
from django.utils import timezone

from laterite_django.flow import limits
from laterite_django.stores import NewJob
from laterite_django.stores.database import postgres
from laterite_django.stores.database.postgres import SETTINGS, Prepared
from tests.testapp import jobs

__all__: list[str] = []

pytestmark = pytest.mark.parametrize("store_kind", ["database"], indirect=True)


def rows(sql: str) -> list[tuple]:
    with connection.cursor() as cursor:
        cursor.execute(sql)
        return cursor.fetchall() if cursor.description else []


def claim_plans() -> list[tuple[int, int]]:
    """(generic, custom) plan counts of each statement of this connection's that claims."""
    return rows("SELECT generic_plans, custom_plans FROM pg_prepared_statements "
                "WHERE statement LIKE '%claim_position = picked.position%'")


def test_a_claim_is_planned_once_per_connection_not_at_every_claim(pg_store):
    jobs.noop.push_many([(i,) for i in range(12)])
    claims = pg_store.claim(["default"], "w", 1)
    for _ in range(10):
        claims = pg_store.settle_and_claim(claims, ["default"], "w", 1)
        assert len(claims) == 1
    plans = claim_plans()
    assert plans, "no claim statement prepared on this connection"
    assert sum(custom for _, custom in plans) == 0
    assert sum(generic for generic, _ in plans) == 11


def explain(name: str, *values: str) -> str:
    """The plan the claim statement `name` runs with, under the claim's settings."""
    with transaction.atomic():
        rows(f"SELECT {SETTINGS}")
        plan = rows(f"EXPLAIN EXECUTE {name}({', '.join(values)})")
    return "\n".join(line for (line,) in plan)


def test_a_claim_planned_on_an_empty_table_reads_it_through_its_indexes(pg_store):
    # Emptied, the table has no statistics: the planner takes it for a few pages, where
    # a scan of the whole table would cost less than an index's. The plan is made at
    # the next claim and kept while the statistics stay as they are.
    rows("TRUNCATE laterite_job")
    jobs.noop.push(1)
    claims = pg_store.claim(["default"], "w", 1)
    jobs.noop.push(2)
    assert len(pg_store.settle_and_claim(claims, ["default"], "w", 1)) == 1
    claim = explain("laterite_claim", "'{default}'", "1", "1", "'t'", "'w'")
    settle = explain("laterite_settle_and_claim", "'{1}'", "'{t}'", "'{default}'",
                     "1", "1", "'t'", "'w'")
    for plan in (claim, settle):
        assert "laterite_job_due" in plan
        assert "Seq Scan on laterite_job" not in plan, plan


def test_the_claims_settings_end_with_its_transaction(pg_store):
    jobs.noop.push(1)
    assert len(pg_store.claim(["default"], "w", 1)) == 1
    assert claim_plans()
    assert rows("SELECT current_setting('plan_cache_mode'), current_setting('enable_seqscan'), "
                "current_setting('enable_bitmapscan'), current_setting('jit'), "
                "current_setting('synchronous_commit')") == [
        ("auto", "on", "on", rows("SHOW jit")[0][0], "on")]
    assert rows("SHOW jit") == rows("SELECT reset_val FROM pg_settings WHERE name = 'jit'")


@pytest.fixture(params=["queue", "key"])
def limited(request):
    """The claim a limit makes: of a limited queue alone (postgres.queue_limited_claim), or
    with a job whose concurrency is limited defined in this process (postgres.limited_claim,
    which counts running jobs per key); the texts of its statements."""
    if request.param == "key":
        limits.note_limited_task("tests.stores.keyed")
        statements = postgres.limited_claim((), "t", "w", ["default"], 2, {}, 8)
    else:
        statements = postgres.queue_limited_claim((), "t", "w", ["default"], 2, {})
    with override_settings(LATERITE_QUEUE_LIMITS={"default": {"concurrency": 3, "rate": "50/m"}}):
        yield [Prepared(b"", sql, None).numbered.decode() for sql, _ in statements]
    limits.limited_tasks.discard("tests.stores.keyed")


def test_a_limited_claim_runs_its_statements_by_name(pg_store, limited):
    # Each prepared once per connection under a name of laterite's and run by it, all
    # in one round trip (postgres.run_planned_all), as the plain claim is; with a rate,
    # its values include a period (a float) and a list with NULLs, written as text.
    jobs.noop.push_many([(i,) for i in range(6)])
    claims = pg_store.claim(["default"], "w", 2)
    assert len(claims) == 2
    claims = pg_store.settle_and_claim(claims, ["default"], "w", 2)
    assert len(claims) == 2  # the first two deleted: two of the three running again
    assert rows("SELECT count(*) FROM laterite_job") == [(4,)]
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement, generic_plans + custom_plans FROM pg_prepared_statements "
                       "WHERE name LIKE 'laterite%%' AND statement = ANY(%s)", [limited])
        runs = dict(cursor.fetchall())
    assert runs == {text: 2 for text in limited}
    rows("DEALLOCATE ALL")  # dropped: run the ordinary way, then prepared again
    claims = pg_store.settle_and_claim(claims, ["default"], "w", 2)
    assert [c.payload for c in claims] == ['{"args":[4],"kwargs":{}}', '{"args":[5],"kwargs":{}}']
    assert pg_store.claim(["default"], "w", 2) == []
    assert len(dict(rows("SELECT statement, 1 FROM pg_prepared_statements "
                         "WHERE name LIKE 'laterite%'"))) >= len(limited)  # prepared again


def test_a_claim_runs_again_when_its_prepared_statement_was_dropped(pg_store):
    jobs.noop.push_many([(i,) for i in range(3)])
    first = pg_store.claim(["default"], "w", 1)
    rows("DEALLOCATE ALL")
    second = pg_store.settle_and_claim(first, ["default"], "w", 1)
    rows("DISCARD ALL")
    third = pg_store.settle_and_claim(second, ["default"], "w", 1)
    assert [len(first), len(second), len(third)] == [1, 1, 1]
    assert len({c.id for c in first + second + third}) == 3
    pg_store.delete(third)
    assert rows("SELECT count(*) FROM laterite_job") == [(0,)]
    jobs.noop.push(4)
    assert len(pg_store.claim(["default"], "w", 1)) == 1
    assert claim_plans()  # prepared again


def test_a_claim_inside_atomic_joins_the_callers_transaction(pg_store):
    jobs.noop.push(1)
    with pytest.raises(ZeroDivisionError), transaction.atomic():
        [claim] = pg_store.claim(["default"], "w", 1)
        assert rows("SELECT token FROM laterite_job") == [(claim.token,)]
        1 / 0  # noqa: B018
    assert rows("SELECT token, attempts FROM laterite_job") == [(None, 0)]
    assert len(pg_store.claim(["default"], "w", 1)) == 1


QUEUES = ['a,b', 'say "hi"', "back\\slash", "{braces}", "NULL", " spaced ", "été", "it's"]


def test_queues_whose_names_need_quoting_are_claimed_in_order(pg_store):
    now = timezone.now()
    pg_store.push([
        NewJob(name="tests.noop", queue=queue, pushed_at=now, available_at=now,
               payload=json.dumps({"args": [queue], "kwargs": {}}))
        for queue in reversed(QUEUES)])
    claims = pg_store.claim(QUEUES, "w", len(QUEUES))
    assert [c.queue for c in claims] == QUEUES
    assert [json.loads(c.payload)["args"] for c in claims] == [[q] for q in QUEUES]
    assert claim_plans()  # the claim ran by name, its queues written as text


def plain_plan(sql: str, params: list) -> str:
    """The plan `sql` runs with outside the claim's settings (inside the caller's
    transaction, or behind a pooler), its values given."""
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN {sql}", params)
        return "\n".join(line for (line,) in cursor.fetchall())


def test_a_deletion_of_finished_jobs_reads_only_their_rows_whatever_the_statistics(pg_store):
    # Emptied, then filled, the table has no statistics: a deletion joined to its list
    # of finished jobs was planned as a scan of the whole table (every live and dead
    # row, at each deletion: 1 ms for 20 jobs of 3,000) hashed against the list.
    rows("TRUNCATE laterite_job")
    jobs.noop.push_many([(i,) for i in range(3000)])
    claims = pg_store.claim(["default"], "w", 3000)
    ids, tokens = [c.id for c in claims[:20]], [c.token for c in claims[:20]]
    plan = plain_plan(postgres.DELETE, [ids, tokens])
    assert "laterite_job_pkey" in plan and "Seq Scan" not in plan, plan
    settle = postgres.claim(claims[:20], "t", timezone.now(), "w", ["default"], 1)
    [(statement, params)] = settle
    plan = plain_plan(statement, params)
    assert "laterite_job_pkey" in plan and "Seq Scan on laterite_job" not in plan, plan
    assert pg_store.delete(claims) == 3000


@pytest.fixture
def unprepared():
    """Django's connection as a pooler's client has it: nothing prepared (OPTIONS
    `"prepare_threshold": None`), so a claim cannot run by name."""
    options = connection.settings_dict.setdefault("OPTIONS", {})
    before = dict(options)
    options["prepare_threshold"] = None
    connection.close()
    yield
    options.clear()
    options.update(before)
    connection.close()


def seq_scans() -> int:
    """Scans of the whole job table so far (this connection's counts flushed first)."""
    rows("SELECT pg_stat_force_next_flush()")
    return rows("SELECT seq_scan FROM pg_stat_user_tables WHERE relname = 'laterite_job'")[0][0]


def test_a_claim_that_cannot_run_by_name_still_reads_the_table_through_its_indexes(
        pg_store, unprepared):
    # Behind a pooler the claim runs unprepared; its settings still come with it, in
    # the same transaction (one round trip), and keep it on the indexes of a table
    # without statistics, which it would otherwise read whole at every claim.
    rows("TRUNCATE laterite_job")
    jobs.noop.push_many([(i,) for i in range(3000)])
    before = seq_scans()
    claims = pg_store.claim(["default"], "w", 100)
    claims = pg_store.settle_and_claim(claims, ["default"], "w", 100)
    assert len(claims) == 100
    assert seq_scans() == before
    assert claim_plans() == []  # nothing prepared
    assert rows("SELECT current_setting('enable_seqscan'), "
                "current_setting('synchronous_commit')") == [("on", "on")]
    with transaction.atomic():  # inside the caller's transaction: none of its settings
        assert len(pg_store.settle_and_claim(claims, ["default"], "w", 1)) == 1
        assert rows("SELECT current_setting('enable_seqscan')") == [("on",)]


def claimed_index_scans() -> int:
    """Reads of the index of claimed jobs so far (a deletion read every claimed row
    through it, in a bitmap)."""
    rows("SELECT pg_stat_force_next_flush()")
    return rows("SELECT idx_scan FROM pg_stat_user_indexes "
                "WHERE indexrelname = 'laterite_job_claimed'")[0][0]


def test_finished_jobs_are_deleted_through_the_primary_key_after_a_vacuum_of_the_empty_table(
        pg_store):
    # VACUUM of the emptied table (autovacuum's, or the workers' own, once a queue has
    # drained): the planner costs a few random page reads above reading the whole table
    # and put every deletion of finished jobs on a scan of it, or of every claimed row.
    rows("TRUNCATE laterite_job")
    rows("VACUUM laterite_job")
    jobs.noop.push_many([(i,) for i in range(3000)])
    claims = pg_store.claim(["default"], "w", 100)
    before = seq_scans(), claimed_index_scans()
    assert pg_store.delete(claims[:20]) == 20
    assert len(pg_store.settle_and_claim(claims[20:40], ["default"], "w", 1)) == 1
    assert (seq_scans(), claimed_index_scans()) == before
    assert rows("SELECT count(*) FROM laterite_job") == [(2960,)]
