"""queue_history: its filters (name, queue, status, argument, time), --json, and the
pruning (--prune, the workers' housekeeping): on PostgreSQL an old day's partition
dropped whole while the rows of live partitions stay; on SQLite a DELETE by index."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.db import connection
from django.test import override_settings

from laterite_django.models import JobRecord
from laterite_django.stores.database.history import (
    RECORD_TABLE,
    keep_partitions,
    partition_name,
    partitions,
    prune_history,
)

pytestmark = pytest.mark.django_db(transaction=True)

NOW = datetime.now(UTC)


def record(job_id: int, *, name: str = "shop.export", queue: str = "default",
           status: str = "succeeded", kwargs: dict | None = None, args: list | None = None,
           ago: timedelta = timedelta(minutes=1), error: str = "") -> JobRecord:
    finished = NOW - ago
    return JobRecord.objects.create(
        job_id=job_id, name=name, queue=queue, status=status, args=args or [],
        kwargs=kwargs or {}, attempts=1, pushed_at=finished - timedelta(seconds=3),
        started_at=finished - timedelta(seconds=1), finished_at=finished,
        worker="host:1", error=error)


def history(*args: str) -> str:
    out = StringIO()
    call_command("queue_history", *args, stdout=out, stderr=StringIO())
    return out.getvalue()


def found(*args: str) -> list[int]:
    return [row["job_id"] for row in json.loads(history("--json", *args))]


def test_filters_and_json():
    record(1, kwargs={"order_id": 8812})
    record(2, kwargs={"order_id": 8813}, ago=timedelta(minutes=2))
    record(3, name="mail.send", queue="mail", status="failed", error="SMTP down\n...",
           kwargs={"order_id": 8812, "to": "a@example.com"}, ago=timedelta(minutes=3))
    record(4, status="cancelled", args=[8812], ago=timedelta(days=2))

    assert found() == [1, 2, 3, 4]  # newest first
    assert found("--name", "mail.send") == [3]
    assert found("--queue", "default") == [1, 2, 4]
    assert found("--status", "cancelled") == [4]
    assert found("--arg", "order_id=8812") == [1, 3]
    assert found("--arg", "order_id=8812", "--arg", "to=a@example.com") == [3]
    assert found("--arg", "order_id=\"8812\"") == []  # a string is not the number
    assert found("--arg", "0=8812") == [4]  # by position
    assert found("--since", (NOW - timedelta(days=1)).isoformat()) == [1, 2, 3]
    assert found("--until", (NOW - timedelta(days=1)).isoformat()) == [4]
    assert found("--limit", "2") == [1, 2]

    data = json.loads(history("--json", "--name", "mail.send"))[0]
    assert data["status"] == "failed" and data["error"].startswith("SMTP down")
    assert data["kwargs"] == {"order_id": 8812, "to": "a@example.com"}
    assert data["ran"] == pytest.approx(1.0) and data["waited"] == pytest.approx(2.0)
    assert data["worker"] == "host:1" and data["encrypted"] is False

    table = history("--status", "failed")
    assert "mail.send" in table and "SMTP down" in table and "shop.export" not in table


def test_an_argument_filter_looks_through_a_bounded_window():
    for i in range(5):
        record(i, kwargs={"order_id": i}, ago=timedelta(minutes=i + 1))
    assert found("--arg", "order_id=4") == [4]
    err = StringIO()
    call_command("queue_history", "--json", "--arg", "order_id=4", "--scan", "3",
                 stdout=StringIO(), stderr=err)
    assert "3 newest records only" in err.getvalue()
    assert found("--arg", "order_id=4", "--scan", "3") == []  # older than the window


def test_bad_arguments_are_refused():
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match="KEY=VALUE"):
        call_command("queue_history", "--arg", "order_id")
    with pytest.raises(CommandError, match="ISO 8601"):
        call_command("queue_history", "--since", "yesterday")
    with pytest.raises(CommandError, match="not set"):
        call_command("queue_history", "--prune")


@override_settings(LATERITE_QUEUE_HISTORY={"keep": "7d", "queues": {"mail": "1d"}})
def test_prune_keeps_what_is_within_its_keep():
    if connection.vendor == "postgresql":
        # Partitions for the old days, made as the workers make them, ahead.
        with connection.cursor() as cursor:
            keep_partitions(cursor, NOW - timedelta(days=10), None)
    old = record(1, ago=timedelta(days=10))
    kept = record(2, ago=timedelta(days=6))
    mail_old = record(3, queue="mail", ago=timedelta(days=2))
    mail_new = record(4, queue="mail", ago=timedelta(hours=2))
    fresh = record(5)
    out = history("--prune")
    left = set(JobRecord.objects.values_list("id", flat=True))
    assert left == {kept.id, mail_new.id, fresh.id}, out
    assert old.id not in left and mail_old.id not in left
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            names = partitions(cursor)
        old_day = partition_name((NOW - timedelta(days=10)).date())
        assert old_day not in names and old_day in out  # dropped whole
        assert partition_name(NOW.date()) in names
        assert partition_name((NOW + timedelta(days=3)).date()) in names  # made ahead
        # The live partitions' rows were not touched: each holds the rows kept of its day.
        # (kept: in the default partition, its day not made; a row of yesterday likewise)
        for row in [r for r in (mail_new, fresh) if r.finished_at.date() == NOW.date()]:
            with connection.cursor() as cursor:
                cursor.execute(f"SELECT id FROM {partition_name(row.finished_at.date())} "
                               f"WHERE id = %s", [row.id])
                assert cursor.fetchone() is not None


@override_settings(LATERITE_QUEUE_HISTORY={"keep": "7d"})
def test_prune_is_safe_to_repeat_and_an_insert_never_fails():
    prune_history("default")
    prune_history("default")
    # A record far in the future or the past finds a partition (the default one).
    record(1, ago=timedelta(days=-400))
    record(2, ago=timedelta(days=400))
    assert JobRecord.objects.count() == 2
    deleted, _, _ = prune_history("default")
    assert deleted == 1
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT count(*) FROM {RECORD_TABLE}_default")
            assert cursor.fetchone()[0] == 1


def test_the_admin_estimates_a_partitioned_history_without_counting_it():
    from laterite_django.stores import get_store

    for i in range(20):
        record(i)
    if connection.vendor != "postgresql":
        assert get_store().estimated_rows(JobRecord) is None  # SQLite: counted
        return
    with connection.cursor() as cursor:
        cursor.execute(f"ANALYZE {RECORD_TABLE}")
    assert get_store().estimated_rows(JobRecord) == 20  # the partitions' estimates


@override_settings(LATERITE_QUEUE_HISTORY={"keep": "7d"})
def test_a_prune_behind_a_long_reader_gives_up_rather_than_hold_the_settles():
    import psycopg

    from laterite_django.stores import get_store

    if connection.vendor != "postgresql":
        pytest.skip("partitions are PostgreSQL's")
    with connection.cursor() as cursor:
        keep_partitions(cursor, NOW - timedelta(days=10), None)  # one to drop
    record(1, ago=timedelta(days=10))
    settings = connection.settings_dict
    with psycopg.connect(host=settings["HOST"], port=settings["PORT"] or 5432,
                         user=settings["USER"], dbname=settings["NAME"]) as reader:
        reader.execute(f"SELECT count(*) FROM {RECORD_TABLE}")  # its lock held, open
        store = get_store()
        store._history_pruning.pruned_at = 0.0
        assert store._history_pruning.maybe() == 0  # gave up after lock_timeout, logged
        reader.rollback()
    assert JobRecord.objects.count() == 1  # the next prune does it
    assert prune_history("default")[0] >= 0
    assert JobRecord.objects.count() == 0
