"""Fixtures of the multi-host tests: PgBouncer in front of the test PostgreSQL, run by
the test itself (Debian's package, installed here if missing and root)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connection

from bench.hosts.install import missing_reason
from bench.hosts.pgbouncer import PgBouncer
from tests.conftest import ROOT, Workers

__all__ = ["probe"]


@pytest.fixture(scope="module")
def pgbouncer(django_db_setup: None, django_db_blocker: Any) -> Iterator[PgBouncer]:
    """PgBouncer in transaction pooling mode, three server connections kept open and
    handed out in turn, so consecutive transactions of one client land on different
    server connections (what a busy pooler does)."""
    if os.environ.get("LATERITE_TEST_DB", "sqlite") != "postgres":
        pytest.skip("PgBouncer sits in front of PostgreSQL (LATERITE_TEST_DB=postgres)")
    reason = missing_reason("pgbouncer")
    if reason:
        pytest.skip(f"PgBouncer cannot be had here: {reason}")
    settings = connection.settings_dict
    bouncer = PgBouncer(server_host=settings["HOST"], server_port=int(settings["PORT"]),
                        pool_size=8, min_pool_size=3, round_robin=True)
    bouncer.start()
    try:
        with django_db_blocker.unblock():
            bouncer.warm(str(connection.settings_dict["NAME"]), 3)
        yield bouncer
    finally:
        bouncer.stop()


def through(pgbouncer: PgBouncer, *, listen_direct: bool = False) -> dict[str, str]:
    """The environment of a subprocess whose database connection goes through `pgbouncer`
    (with `listen_direct`, LATERITE_QUEUE_LISTEN_DATABASE names a direct one)."""
    env = {"LATERITE_PG_HOST": pgbouncer.listen, "LATERITE_PG_PORT": str(pgbouncer.port)}
    if listen_direct:
        env["LATERITE_TEST_LISTEN_PORT"] = str(connection.settings_dict["PORT"])
    return env


def probe(workers: Workers, action: str, env: dict[str, str], timeout: float = 120
          ) -> subprocess.CompletedProcess:
    """Run `tests.hosts.probe ACTION` in a subprocess with `env` added to the test's."""
    try:
        return subprocess.run([sys.executable, "-m", "tests.hosts.probe", action], cwd=ROOT,
                              env=workers.env(**env), capture_output=True, text=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"probe {action} did not end in {timeout} s: {e.stderr!r}")
