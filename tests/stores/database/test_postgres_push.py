"""A push on PostgreSQL (stores/database/postgres.py): outside a transaction its statement runs by
name through libpq; it must still run when that prepared statement was dropped, join
the caller's transaction inside `atomic()`, and store every value as psycopg would."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from django.db import connection, transaction
from django.utils import timezone

from laterite_django.models import Job
from tests.testapp import jobs

__all__: list[str] = []

pytestmark = pytest.mark.parametrize("store_kind", ["database"], indirect=True)


def run(sql: str) -> None:
    with connection.cursor() as cursor:
        cursor.execute(sql)


def prepared_names() -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT name FROM pg_prepared_statements ORDER BY name")
        return [name for (name,) in cursor.fetchall()]


def test_a_push_runs_again_when_its_prepared_statement_was_dropped(pg_store):
    first = jobs.noop.push(1)
    assert "laterite_push_one" in prepared_names()
    run("DEALLOCATE ALL")
    second = jobs.noop.push(2)
    run("DISCARD ALL")
    third = jobs.noop.push(3)
    assert [first.status, second.status, third.status] == ["queued"] * 3
    assert sorted(Job.objects.values_list("id", flat=True)) == [first.id, second.id, third.id]


def test_a_push_after_a_rollback_runs(pg_store):
    jobs.noop.push(1)
    # A rollback makes psycopg drop every prepared statement of the connection.
    with pytest.raises(ZeroDivisionError), transaction.atomic():
        jobs.noop.push(2)
        1 / 0  # noqa: B018
    with transaction.atomic():
        jobs.noop.push(3)
        with pytest.raises(ZeroDivisionError), transaction.atomic():
            jobs.noop.push(4)
            1 / 0  # noqa: B018
    jobs.noop.push(5)
    assert sorted(Job.objects.values_list("payload", flat=True)) == [
        f'{{"args":[{i}],"kwargs":{{}}}}' for i in (1, 3, 5)]


def test_a_push_inside_atomic_after_the_statement_was_dropped_keeps_the_transaction(pg_store):
    jobs.noop.push(1)
    with transaction.atomic():
        run("DEALLOCATE ALL")
        jobs.noop.push(2)
        assert Job.objects.count() == 2  # the transaction still works
    assert Job.objects.count() == 2


def test_a_push_stores_its_times_and_priority_as_given(pg_store):
    paris = timezone.now().astimezone(ZoneInfo("Europe/Paris")) + timedelta(hours=1)
    at_paris = jobs.noop.push_at(paris, 1)
    soon = jobs.noop.push_in(30, 2)
    urgent = jobs.noop.enqueue((3,), {}, priority=7)
    assert Job.objects.get(id=at_paris.id).available_at == paris
    assert Job.objects.get(id=urgent.id).priority == 7
    row = Job.objects.get(id=soon.id)
    # push_in's moment is counted by the server's clock from its push, a moment after
    # the pusher's own pushed_at (this host's clock and the server's agree here).
    assert timedelta(seconds=29) < row.available_at - row.pushed_at < timedelta(seconds=31)
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement_timestamp()")
        (now,) = cursor.fetchone()
    assert timedelta(seconds=25) < row.available_at - now <= timedelta(seconds=30)


@pytest.mark.parametrize("when", [
    datetime(1999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),  # before PostgreSQL's epoch
    datetime(2000, 1, 1, tzinfo=UTC),
    datetime(2263, 4, 5, 6, 7, 8, 123457, tzinfo=UTC),
    datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
], ids=["before-2000", "2000", "2263", "9999"])
def test_a_push_by_name_stores_its_times_to_the_microsecond(pg_store, when):
    """Outside a transaction the store's push sends its times in binary (microseconds
    since 2000) through libpq: each is read back as it was given, from before 2000 to
    9999. The job due at `when` goes to the store as push_at makes it, but below
    push_at's check (a moment within 10 years of now): the encoding is what is tested."""
    before = timezone.now()
    (new,) = jobs.noop.new_jobs([((1,), {})])
    (at_id,) = pg_store.push([replace(new, available_at=when, delay=None)])  # as push_at's
    windowed = jobs.windowed.push("w")  # retry_until: its push's moment + 3 s
    after = timezone.now()
    assert "laterite_push_one" in prepared_names()  # by name, not through psycopg
    row = Job.objects.get(id=at_id)
    assert row.available_at == when
    assert before <= row.pushed_at <= after
    row = Job.objects.get(id=windowed.id)
    assert row.retry_until - row.pushed_at == timedelta(seconds=3)
    # Due at the server's now (its clock), the pusher's pushed_at a moment before.
    assert timedelta(0) <= row.available_at - row.pushed_at < timedelta(seconds=1)
    with connection.cursor() as cursor:  # as PostgreSQL itself sees them
        cursor.execute("SELECT available_at = %s FROM laterite_job WHERE id = %s",
                       [when, at_id])
        assert cursor.fetchone() == (True,)


def test_a_duplicate_unique_key_returns_no_id(pg_store):
    first = jobs.unique.push(7)
    assert first.status == "queued"
    assert jobs.unique.push(7).status == "duplicate"
    assert list(Job.objects.values_list("id", flat=True)) == [first.id]
