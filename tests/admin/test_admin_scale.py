"""The admin's lists with many rows: a fixed number of queries, no full count per page.

The queries of one changelist page: the session, the user, the store's counts
(the job table's queues, their jobs, then failed jobs, per queue; each count stops
at the summary's cap), the paused queues, the number of rows
(PostgreSQL's estimate for a big unfiltered table, else a COUNT), the page's rows,
and on the failed list the distinct names for the name filter (the jobs list
offers the registered names: no query). None per row.
"""

from __future__ import annotations

import io
import os
import time

import pytest
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext

from laterite_django.admin.paginator import ESTIMATE_ABOVE
from laterite_django.admin.summary import CAP
from laterite_django.models import FailedJob, Job
from laterite_django.stores import get_store
from tests.admin.test_admin import FAILED, JOBS, make_failed, make_job

pytestmark = pytest.mark.django_db

# LATERITE_TEST_ADMIN_ROWS=1000000 for the full size (a few minutes more).
BIG = int(os.environ.get("LATERITE_TEST_ADMIN_ROWS", "100000"))
# session, user, job queues, job counts, failed counts, paused queues, row count, page
# rows; and the filter's names on the failed list
PAGE_QUERIES = {"jobs": 8, "failed": 9}


def page_queries(url: str) -> int:
    return PAGE_QUERIES["failed" if url.startswith(FAILED) else "jobs"]


def postgres() -> bool:
    return connection.vendor == "postgresql"


@pytest.fixture(autouse=True)
def fast_passwords(settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


def insert_rows(n: int) -> None:
    """Insert `n` jobs (all four states, three queues) and `n` failed jobs in two statements."""
    if postgres():
        numbers = f"generate_series(1, {n}) AS s(i)"
        now, ago = "now()", "now() - make_interval(secs => i)"
        later = "now() + interval '1 hour'"
        prefix, source = "", f"FROM {numbers}"
        text = "i::text"
    else:
        prefix = f"WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < {n}) "
        now, ago = "strftime('%Y-%m-%d %H:%M:%f', 'now')", (
            "strftime('%Y-%m-%d %H:%M:%f', 'now', '-' || i || ' seconds')")
        later = "strftime('%Y-%m-%d %H:%M:%f', 'now', '+1 hour')"
        source = "FROM s"
        text = "CAST(i AS TEXT)"
    payload = f"'{{\"args\": [' || {text} || '], \"kwargs\": {{}}}}'"
    queue = "CASE i % 3 WHEN 0 THEN 'default' WHEN 1 THEN 'mail' ELSE 'low' END"
    name = "CASE i % 4 WHEN 0 THEN 'tests.record' WHEN 1 THEN 'tests.mail' ELSE 'tests.noop' END"
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO laterite_job (name, queue, payload, priority, pushed_at, available_at, "
            f"attempts, token, claimed_at, claimed_by, last_error, claim_position) "
            f"{prefix}SELECT {name}, {queue}, {payload}, "
            f"0, {ago}, CASE WHEN i % 5 = 0 THEN {later} ELSE {ago} END, "
            f"CASE WHEN i % 7 = 0 THEN 1 ELSE 0 END, "
            f"CASE WHEN i % 7 = 0 THEN 'tok' || {text} END, "
            f"CASE WHEN i % 7 = 0 THEN {now} END, '', '', 0 {source}"
        )
        cursor.execute(
            f"INSERT INTO laterite_failed_job (job_id, name, queue, payload, priority, attempts, "
            f"pushed_at, failed_at, error) "
            f"{prefix}SELECT i, {name}, {queue}, {payload}, "
            f"0, 3, {ago}, {ago}, 'ValueError: broken ' || {text} || "
            f"'\nTraceback (most recent call last):\n  File \"jobs.py\", line 1' {source}"
        )
        if postgres():
            # What autovacuum does for a table that grew: refresh the planner's estimate
            # and the visibility map (VACUUM needs the rows committed: transactional_db).
            cursor.execute("VACUUM ANALYZE laterite_job")
            cursor.execute("VACUUM ANALYZE laterite_failed_job")


def full_counts(queries: list[dict]) -> list[str]:
    """The paginator-style COUNT(*) queries over a whole table (no WHERE)."""
    return [q["sql"] for q in queries if '"__count"' in q["sql"] and " WHERE " not in q["sql"]]


@pytest.mark.parametrize("url", [JOBS, FAILED])
def test_page_queries_do_not_grow_with_rows(admin_client, django_assert_num_queries, url):
    make_job(), make_failed()
    # A small table on PostgreSQL: the estimate is read, then rows are counted exactly.
    expected = page_queries(url) + (1 if postgres() else 0)
    with django_assert_num_queries(expected):
        assert admin_client.get(url).status_code == 200
    for _ in range(150):  # more than one page, in every state
        make_job("running"), make_job("delayed"), make_failed(queue="mail")
    with django_assert_num_queries(expected):
        response = admin_client.get(url)
    assert len(response.context["cl"].result_list) == 100


@pytest.mark.parametrize("url", [JOBS, FAILED])
def test_detail_page_queries(admin_client, django_assert_num_queries, url):
    obj = make_job() if url == JOBS else make_failed()
    admin_client.get(f"{url}{obj.pk}/change/")  # Django's content types, cached once read
    # session, user, the row; no summary on a detail page.
    with django_assert_num_queries(3):
        assert admin_client.get(f"{url}{obj.pk}/change/").status_code == 200


@pytest.mark.slow
def test_big_tables_render_without_a_full_count(transactional_db, admin_client, capsys):
    insert_rows(BIG)
    assert Job.objects.count() == FailedJob.objects.count() == BIG
    admin_client.get(JOBS)  # warm the caches (templates, the first connection)
    pages = [
        (JOBS, False), (FAILED, False), (f"{JOBS}?p=500", False),
        (f"{JOBS}?queue=mail&state=waiting", True), (f"{FAILED}?q=broken+{BIG - 1}", True),
        (f"{FAILED}?q=Broken", True), (f"{JOBS}?q=ARGS+{BIG - 1}", True),
    ]
    timings = []
    for url, filtered in pages:
        with CaptureQueriesContext(connection) as captured:
            started = time.perf_counter()
            response = admin_client.get(url)
            timings.append(f"{url}: {time.perf_counter() - started:.3f} s")
        assert response.status_code == 200
        assert len(captured) == page_queries(url), [q["sql"][:120] for q in captured]
        cl = response.context["cl"]
        if not filtered and postgres():
            # PostgreSQL's estimate stands in for COUNT(*): close, not exact.
            assert full_counts(captured.captured_queries) == []
            assert cl.result_count > ESTIMATE_ABOVE and abs(cl.result_count - BIG) < BIG // 10
        elif not filtered:
            assert cl.result_count == BIG
        assert len(cl.result_list) == (1 if url.endswith(f"+{BIG - 1}") else 100)
        if url.endswith("=Broken"):
            assert cl.result_count == BIG  # every failed row says "broken"
    # The summary's counts stop at CAP: each the exact count or CAP, said to be more.
    rows = {r.queue: r for r in response.context["queue_summary"].rows}
    exact = get_store().counts()
    assert sum(c.failed for c in exact.values()) == BIG
    assert sum(c.total for c in exact.values()) == BIG
    assert set(rows) == set(exact)
    running = sum(c.running for c in exact.values())
    for queue, counts in exact.items():
        for state in ("waiting", "delayed", "failed"):
            shown, real = getattr(rows[queue], state), getattr(counts, state)
            assert shown == min(real, CAP), (queue, state)
            assert (state in rows[queue].capped) == (real > CAP), (queue, state)
        # The running jobs are read up to the cap in all, then told per queue.
        assert rows[queue].running <= counts.running
        assert ("running" in rows[queue].capped) == (running > CAP)
    assert sum(r.running for r in rows.values()) <= min(running, CAP + 1)
    if BIG // 3 > CAP:
        assert f">{CAP}+</a>" in response.content.decode()
    out = io.StringIO()
    started = time.perf_counter()
    call_command("queue_status", stdout=out)
    timings.append(f"queue_status: {time.perf_counter() - started:.3f} s")
    assert "mail" in out.getvalue()
    with capsys.disabled():
        print(f"\n{connection.vendor}, {BIG} jobs and {BIG} failed jobs:", *timings, sep="\n  ")


def insert_records(n: int) -> None:
    """Insert `n` history records (three queues, one in ten failed) in one statement."""
    if postgres():
        prefix, source, text = "", f"FROM generate_series(1, {n}) AS s(i)", "i::text"
        ago = "now() - make_interval(secs => i)"
        args = "jsonb_build_array(i)"
        kwargs = "jsonb_build_object('order_id', i)"
    else:
        prefix = f"WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < {n}) "
        source, text = "FROM s", "CAST(i AS TEXT)"
        ago = "strftime('%Y-%m-%d %H:%M:%f', 'now', '-' || i || ' seconds')"
        args, kwargs = "json_array(i)", "json_object('order_id', i)"
    queue = "CASE i % 3 WHEN 0 THEN 'default' WHEN 1 THEN 'mail' ELSE 'low' END"
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO laterite_job_record (job_id, name, queue, args, kwargs, status, "
            f"attempts, pushed_at, started_at, finished_at, worker, error) "
            f"{prefix}SELECT i, 'tests.add', {queue}, {args}, {kwargs}, "
            f"CASE WHEN i % 10 = 0 THEN 'failed' ELSE 'succeeded' END, 1, {ago}, {ago}, {ago}, "
            f"'host:1', CASE WHEN i % 10 = 0 THEN 'smtplib.SMTPException: 421 ' || {text} "
            f"ELSE '' END {source}")
        if postgres():
            cursor.execute("ANALYZE laterite_job_record")


@pytest.mark.slow
def test_the_search_filters_over_big_tables(transactional_db, admin_client, capsys):
    """The lists' argument, error class and time filters over BIG rows each: an
    argument or error test reads only the window of the newest rows (SCAN) the
    indexed filters keep, and says so when it was full. The figures are printed."""
    from laterite_django.models import JobRecord
    from laterite_django.stores.database.matching import SCAN

    insert_rows(BIG)
    insert_records(BIG)
    history = "/admin/laterite_django/jobrecord/"
    newest = BIG  # ids run with i: the largest is the newest by id, the oldest pushed
    pages = [
        # (url, rows expected on the page or None, window full)
        (f"{JOBS}?arg=0%3D{BIG - 5}", 1, BIG > SCAN),  # among the newest ids
        (f"{JOBS}?arg=0%3D{newest}", 1, BIG > SCAN),
        (f"{FAILED}?arg=0%3D2", 1, BIG > SCAN),  # failed_at newest: i = 2 is in the window
        (f"{FAILED}?error=ValueError&queue=mail", 100, BIG // 3 > SCAN),
        (f"{FAILED}?error=SMTPException", 0, BIG > SCAN),
        (f"{FAILED}?since=2000-01-01&until=2000-01-02", 0, False),
        (f"{history}?arg=order_id%3D5", 1, BIG > SCAN),
        (f"{history}?error=SMTPException&queue=low", min(100, (BIG + 10) // 30), BIG // 3 > SCAN),
        (f"{history}?since=2000-01-01", 100, False),
    ]
    admin_client.get(FAILED)  # warm the caches
    timings = []
    for url, on_page, full in pages:
        started = time.perf_counter()
        response = admin_client.get(url)
        timings.append(f"{url}: {time.perf_counter() - started:.3f} s")
        assert response.status_code == 200, url
        cl = response.context["cl"]
        if on_page is not None:
            assert len(cl.result_list) == on_page, url
        said = "".join(getattr(spec, "notice", "") for spec in cl.filter_specs)
        assert bool(said) == full, (url, said)
    assert JobRecord.objects.count() == BIG
    with capsys.disabled():
        print(f"\n{connection.vendor}, {BIG} jobs, failed jobs and records, window {SCAN}:",
              *timings, sep="\n  ")
