"""The database store through PgBouncer in transaction pooling mode: each transaction
may run on another server connection, so nothing may rely on session state (prepared
statements, LISTEN, session advisory locks)."""

from __future__ import annotations

import json

import pytest
from django.db import connection

from tests.hosts.conftest import probe, through

__all__: list[str] = []

pytestmark = [pytest.mark.parametrize("store_kind", ["database"], indirect=True), pytest.mark.slow]


def test_hot_statements_run_unprepared_through_the_pooler(pgbouncer, workers):
    result = probe(workers, "hot", through(pgbouncer))
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["done", "40"]


def test_an_idle_worker_polls_when_listen_goes_through_the_pooler(pgbouncer, workers):
    result = probe(workers, "wait", through(pgbouncer))
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "returned"
    assert "through a pooler, where LISTEN hears nothing" in result.stderr


def test_the_listen_database_wakes_idle_workers_through_the_pooler(pgbouncer, workers):
    result = probe(workers, "woken", through(pgbouncer, listen_direct=True))
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "woken"
    assert "LISTEN hears nothing" not in result.stderr


def test_the_vacuum_leaves_no_lock_behind_in_the_pool(pgbouncer, workers):
    result = probe(workers, "vacuum", through(pgbouncer))
    assert result.returncode == 0, result.stderr
    assert int(result.stdout.split()[1]) > 0
    with connection.cursor() as cursor:
        # This test's database only: other runs on the server hold locks of their own.
        cursor.execute("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND "
                       "database = (SELECT oid FROM pg_database WHERE datname = "
                       "current_database())")
        assert cursor.fetchone()[0] == 0


def test_workers_and_commands_through_the_pooler(pgbouncer, store, workers):
    env = through(pgbouncer)
    for i in range(3):
        pushed = workers.command("queue_push", "tests.record", "--payload",
                                 json.dumps({"args": [f"p{i}"], "kwargs": {}}), env=env)
        assert pushed.returncode == 0, pushed.stderr
    pushed = workers.command("queue_push", "tests.fail_now", "--payload",
                             json.dumps({"args": ["f"], "kwargs": {}}), env=env)
    assert pushed.returncode == 0, pushed.stderr
    ran = workers.run("--processes", "2", "--stop-when-empty", env=env, timeout=120)
    assert ran.returncode == 0, ran.stderr
    assert [(c.waiting, c.running, c.failed) for c in store.counts().values()] == [(0, 0, 1)]
    status = workers.command("queue_status", env=env)
    assert status.returncode == 0, status.stderr
    failed = workers.command("queue_failed", env=env)
    assert failed.returncode == 0 and "tests.fail_now" in failed.stdout, failed.stderr
    retried = workers.command("queue_retry", "--all", env=env)
    assert retried.returncode == 0, retried.stderr
    assert sum(c.waiting for c in store.counts().values()) == 1
    pages = probe(workers, "admin", env)
    assert pages.returncode == 0, pages.stderr
    assert pages.stdout.split() == ["200", "200", "200"]


def test_the_check_says_idle_workers_will_poll(pgbouncer, workers):
    result = workers.command("check", "--database", "default", env=through(pgbouncer))
    assert "laterite.W040" in result.stderr + result.stdout
    direct = workers.command("check", "--database", "default",
                             env=through(pgbouncer, listen_direct=True))
    assert direct.returncode == 0, direct.stderr
    assert "laterite.W040" not in direct.stderr + direct.stdout
