"""The store's reads for the admin and the commands: the failed list, job names, row estimates.

The failed list and the tables these read are in the database for every store,
so each store answers the same; the tests run on each.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from laterite_django.models import FailedJob, Job
from laterite_django.stores import NewJob
from tests.admin.test_admin import make_failed, make_job


def test_failed_jobs_newest_first_with_filters(store):
    now = timezone.now()
    old = make_failed(queue="mail", name="tests.mail", failed_at=now - timedelta(days=1))
    new = make_failed(failed_at=now)
    tie = make_failed(failed_at=now)  # the same moment: the higher id first
    assert [f.pk for f in store.failed_jobs()] == [tie.pk, new.pk, old.pk]
    assert [f.pk for f in store.failed_jobs(queue="mail")] == [old.pk]
    assert [f.pk for f in store.failed_jobs(name="tests.always_broken")] == [tie.pk, new.pk]
    assert [f.pk for f in store.failed_jobs(queue="mail", name="tests.always_broken")] == []
    assert [f.pk for f in store.failed_jobs(limit=1)] == [tie.pk]
    assert [f.pk for f in store.failed_jobs([old.pk, new.pk, 999_999])] == [new.pk, old.pk]
    assert store.failed_jobs([]) == []
    row = store.failed_jobs([old.pk])[0]
    assert isinstance(row, FailedJob) and (row.queue, row.error) == ("mail", old.error)


def test_failed_jobs_refuses_a_limit_below_one(store):
    with pytest.raises(ValueError, match="limit must be 1 or more, got 0"):
        store.failed_jobs(limit=0)


def test_missing_failed_names_the_ids_no_failed_job_has(store):
    a, b = make_failed(), make_failed()
    assert store.missing_failed([a.pk, b.pk]) == []
    assert store.missing_failed([999_998, a.pk, 999_997, 999_998]) == [999_998, 999_997]
    assert store.missing_failed([]) == []


@pytest.mark.parametrize("model", [Job, FailedJob])
def test_job_names_reads_each_name_once_in_order(store, model):
    assert store.job_names(model) == []
    make = make_job if model is Job else make_failed
    for name in ("tests.b", "tests.a", "tests.c", "tests.a", "tests.b"):
        make(name=name)
    assert store.job_names(model) == ["tests.a", "tests.b", "tests.c"]
    assert store.job_names(model, limit=2) == ["tests.a", "tests.b"]
    with pytest.raises(ValueError, match="limit must be 1 or more, got 0"):
        store.job_names(model, limit=0)


@pytest.mark.parametrize("model", [Job, FailedJob])
def test_estimated_rows_is_the_planners_estimate_on_postgresql(store, model):
    make = make_job if model is Job else make_failed
    for _ in range(40):
        make()
    if connection.vendor != "postgresql":
        assert store.estimated_rows(model) is None  # no estimate to read: count instead
        return
    with connection.cursor() as cursor:
        cursor.execute(f"ANALYZE {connection.ops.quote_name(model._meta.db_table)}")
    assert store.estimated_rows(model) == 40


def test_counts_stop_at_a_cap_and_say_so(store, store_kind):
    """`counts(cap=...)` (the admin's summary): a count past the cap is the cap and its
    state is `capped`; one within it, exact; without a cap, every count exact."""
    now = timezone.now()
    later = now + timedelta(hours=1)

    def job(queue, at=now):
        return NewJob(name="tests.record", queue=queue, payload='{"args":[],"kwargs":{}}',
                      available_at=at, pushed_at=now)

    store.push([job("big") for _ in range(6)] + [job("big", later) for _ in range(2)]
               + [job("small")])
    for claim in store.claim(["big"], "host:1", limit=3):
        store.fail(claim, "ValueError: broken")
    store.claim(["big"], "host:1", limit=1)  # one running
    for _ in range(3):
        make_failed(queue="small")
    exact = store.counts()
    assert (exact["big"].waiting, exact["big"].delayed, exact["big"].running,
            exact["big"].failed, exact["big"].capped) == (2, 2, 1, 3, set())
    assert (exact["small"].waiting, exact["small"].failed) == (1, 3)
    capped = store.counts(cap=2)
    big, small = capped["big"], capped["small"]
    assert (big.waiting, big.delayed, big.running, big.failed) == (2, 2, 1, 2)
    assert big.capped == {"failed"}
    assert (small.waiting, small.failed, small.capped) == (1, 2, {"failed"})
    store.claim(["big"], "host:1", limit=2)  # three running
    capped = store.counts(cap=2)
    if store_kind == "database":  # counted row by row: the cap holds
        assert capped["big"].running == 2 and "running" in capped["big"].capped
    else:  # Redis keeps the number: exact
        assert capped["big"].running == 3 and "running" not in capped["big"].capped
    assert store.counts(cap=100)["big"].capped == set()
