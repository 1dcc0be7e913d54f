"""A scratch store for a bench script run in a process of its own: the bench project's
settings for one laterite row, on a PostgreSQL database made for the run and dropped
after it (SQLite: a file under $BENCH_RUN_DIR; Redis: a db of $BENCH_REDIS_URL's
server)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")

ADMIN = "host=127.0.0.1 user=postgres dbname=postgres"


def in_scratch_store(store: str, suffix: str, redis_url: str, run_dir: str,
                     run: Callable[[], T]) -> T:
    """Set the bench project up for `store` (a bench row: laterite_pg, laterite_redis,
    laterite_sqlite) under `suffix`, run `run`, then drop the database it made."""
    os.environ.update(
        BENCH_SYSTEM=store, BENCH_DB_SUFFIX=suffix,
        DJANGO_SETTINGS_MODULE="bench.djproject.settings",
        BENCH_REDIS_URL=os.environ.get("BENCH_REDIS_URL", redis_url),
        BENCH_RUN_DIR=os.environ.get("BENCH_RUN_DIR", run_dir),
    )
    Path(os.environ["BENCH_RUN_DIR"]).mkdir(parents=True, exist_ok=True)
    postgres = store != "laterite_sqlite"
    name = f"bench_{store}{suffix}"
    if postgres:
        import psycopg

        with psycopg.connect(ADMIN, autocommit=True) as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {name}")
            admin.execute(f"CREATE DATABASE {name}")
    try:
        return run()
    finally:
        from django.db import connections

        connections.close_all()
        if postgres:
            with psycopg.connect(ADMIN, autocommit=True) as admin:
                admin.execute(f"DROP DATABASE IF EXISTS {name}")
