"""The store inside the caller's transaction on PostgreSQL (`transaction.atomic()`): a
claim or a deletion of finished jobs, plain, limited or of a workflow, leaves that
transaction's settings as it found them. Outside it, a claim's transaction commits
without waiting for the WAL flush and plans without scans of the whole table
(sql_postgres.SETTINGS); inside it, those settings would last to the caller's
commit: the caller's own rows would commit without waiting for the flush, and its
own queries would be planned without sequential scans.

The settings are PostgreSQL's, so these tests are too: SQLite and Redis have none."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from django.db import connection, transaction
from django.test import override_settings
from django.utils import timezone

from laterite_django.flow import limits
from laterite_django.stores import Claim, NewJob, Store

__all__: list[str] = []

pytestmark = pytest.mark.parametrize("store_kind", ["database"], indirect=True)

NAMES = ("synchronous_commit", "plan_cache_mode", "enable_seqscan", "enable_bitmapscan", "jit")


def settings() -> dict[str, str]:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {', '.join('current_setting(%s)' for _ in NAMES)}", NAMES)
        return dict(zip(NAMES, cursor.fetchone(), strict=True))


def new(count: int, marks: str = "") -> list[NewJob]:
    now = timezone.now()
    return [NewJob(name="tests.noop", queue="default", available_at=now, pushed_at=now,
                   payload=f'{{"args":[{i}],"kwargs":{{}}{marks}}}') for i in range(count)]


def claim(store: Store) -> list[Claim]:
    return store.claim(["default"], "w", 2)


def settle_and_claim(store: Store) -> list[Claim]:
    return store.settle_and_claim(store.claim(["default"], "w", 1), ["default"], "w", 1)


def delete(store: Store) -> list[Claim]:
    claims = store.claim(["default"], "w", 2)
    assert store.delete(claims) == 2
    return claims


CALLS: dict[str, Callable[[Store], list[Claim]]] = {
    "claim": claim, "settle_and_claim": settle_and_claim, "delete": delete}


@pytest.fixture
def keyed():
    """A Task with a concurrency limit defined in this process: every claim is then
    the limited one that counts running jobs per key (sql_limits_postgres)."""
    limits.note_limited_task("tests.stores.keyed")
    yield
    limits.limited_tasks.discard("tests.stores.keyed")


def run_inside(store: Store, call: Callable[[Store], list[Claim]]) -> None:
    """`call` inside the caller's transaction: its settings at the end are those it
    started with (the values the commit and the caller's queries go by)."""
    before = settings()
    with transaction.atomic():
        connection.cursor().execute("SELECT 1")  # the caller's transaction has begun
        assert call(store)
        assert settings() == before
        assert before["synchronous_commit"] == "on"


@pytest.mark.parametrize("call", list(CALLS))
def test_a_plain_claim_or_deletion_leaves_the_callers_settings(pg_store, call):
    pg_store.push(new(4))
    run_inside(pg_store, CALLS[call])


@pytest.mark.parametrize("call", list(CALLS))
def test_a_queue_limited_claim_leaves_the_callers_settings(pg_store, call):
    pg_store.push(new(4))
    with override_settings(LATERITE_QUEUE_LIMITS={"default": {"concurrency": 5}}):
        run_inside(pg_store, CALLS[call])


@pytest.mark.parametrize("call", list(CALLS))
def test_a_key_limited_claim_leaves_the_callers_settings(pg_store, keyed, call):
    pg_store.push(new(4))
    run_inside(pg_store, CALLS[call])


@pytest.mark.parametrize("marks", [',"chain":[]', ',"batch":[1,0]'])
@pytest.mark.parametrize("call", ["settle_and_claim", "delete"])
def test_a_workflows_deletion_leaves_the_callers_settings(pg_store, marks, call):
    pg_store.push(new(4, marks))
    run_inside(pg_store, CALLS[call])

