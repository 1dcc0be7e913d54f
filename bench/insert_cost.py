"""What the job table costs a one-job push on PostgreSQL, statement by statement.

    python bench/insert_cost.py [--n 2000] [--rounds 9]

Runs laterite's push-one statement (`sql_postgres_push`, by name, autocommit, one
row per round trip) against the job table as migrated and against copies of it
(with the four CHECK constraints the counters had before migration 0014; with only
the primary key and the due index; with only the primary key), the statement without
its notify check (`RETURNING id` alone; on the job table and on the copy with only
the primary key), and the floor's bare INSERT
(`bench/systems/floor_pg.py`), in alternating rounds on a scratch database
(`bench_insert_cost`, dropped at the end). Prints, per row, the median rate, its
ratio to the floor's, and the server backend's CPU time per push (from
/proc/<pid>/schedstat: what PostgreSQL itself spends, far less noisy than wall time
on a shared machine; the server must run on this machine) and the WAL per push.
No Python of laterite runs in the timed loop: this is the database's share of a push.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if __package__ in (None, ""):  # `python bench/insert_cost.py`
    sys.path.insert(0, str(ROOT))

NAME = "bench_insert_cost"
ADMIN = "host=127.0.0.1 user=postgres dbname=postgres"
COUNTERS = ("attempts", "uncounted", "claim_position", "concurrency_limit")
TABLES = f"""
CREATE TABLE floor_job (id bigserial PRIMARY KEY, payload jsonb NOT NULL,
                        claimed_at timestamptz, token bigint);
CREATE INDEX floor_job_waiting ON floor_job (id) WHERE claimed_at IS NULL;
CREATE TABLE job_checked (LIKE laterite_job INCLUDING ALL);
{"".join(f"ALTER TABLE job_checked ADD CHECK ({c} >= 0);" for c in COUNTERS)}
CREATE TABLE job_due_only (LIKE laterite_job INCLUDING DEFAULTS INCLUDING IDENTITY);
ALTER TABLE job_due_only ADD PRIMARY KEY (id);
CREATE INDEX ON job_due_only (queue, priority DESC, available_at, id) WHERE token IS NULL;
CREATE TABLE job_pk_only (LIKE laterite_job INCLUDING DEFAULTS INCLUDING IDENTITY);
ALTER TABLE job_pk_only ADD PRIMARY KEY (id);
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=9)
    args = parser.parse_args()
    import psycopg

    with psycopg.connect(ADMIN, autocommit=True) as admin:
        admin.execute(f"DROP DATABASE IF EXISTS {NAME}")
        admin.execute(f"CREATE DATABASE {NAME}")
    try:
        measure(args)
    finally:
        with psycopg.connect(ADMIN, autocommit=True) as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {NAME}")


def measure(args: argparse.Namespace) -> None:
    os.environ.update(BENCH_SYSTEM="laterite_pg", BENCH_PG_DB=NAME,
                      DJANGO_SETTINGS_MODULE="bench.djproject.settings",
                      BENCH_RUN_DIR=os.environ.get("BENCH_RUN_DIR", "/tmp/insert_cost"))
    Path(os.environ["BENCH_RUN_DIR"]).mkdir(parents=True, exist_ok=True)
    import django

    django.setup()
    import psycopg
    from django.core.management import call_command
    from django.db import connections

    from laterite_django.stores.database.postgres import PUSH_ONE
    from laterite_django.stores.database.sql import TABLE

    # The statement without its notify check (postgres.MUST_NOTIFY): `RETURNING id`.
    no_check = PUSH_ONE.partition(", CASE WHEN")[0]
    assert no_check != PUSH_ONE and no_check.endswith("RETURNING id"), no_check
    call_command("migrate", verbosity=0)
    connections.close_all()
    conn = psycopg.connect(f"host=127.0.0.1 user=postgres dbname={NAME}", autocommit=True)
    conn.execute(TABLES)
    now = datetime.now(UTC)

    def job(i: int) -> list:
        return ["noop", "default", json.dumps({"args": [i], "kwargs": {}}), 0, now, now,
                None, None]

    rows = {
        "floor (bare INSERT)": ("INSERT INTO floor_job (payload) VALUES (%s)",
                                lambda i: [json.dumps({"i": i})]),
        "job table as migrated": (PUSH_ONE, job),
        "with the 4 CHECKs": (PUSH_ONE.replace(TABLE, "job_checked", 1), job),
        "primary key and due index only": (PUSH_ONE.replace(TABLE, "job_due_only", 1), job),
        "primary key only": (PUSH_ONE.replace(TABLE, "job_pk_only", 1), job),
        "no notify check": (no_check, job),
        "primary key only, no notify check": (no_check.replace(TABLE, "job_pk_only", 1), job),
    }
    pid = conn.execute("SELECT pg_backend_pid()").fetchone()[0]

    def on_cpu_ns() -> int:
        return int(Path(f"/proc/{pid}/schedstat").read_text().split()[0])

    def wal() -> int:
        return int(conn.execute("SELECT pg_current_wal_insert_lsn() - '0/0'").fetchone()[0])

    got: dict[str, list[tuple[float, float, float]]] = {key: [] for key in rows}
    cursor = conn.cursor()
    for sql, values in rows.values():
        for i in range(100):  # warm up: prepared statements, caches
            cursor.execute(sql, values(i), prepare=True)
    keys = list(rows)
    for r in range(args.rounds):
        for key in keys if r % 2 == 0 else keys[::-1]:
            sql, values = rows[key]
            lsn, cpu, wall = wal(), on_cpu_ns(), time.perf_counter()
            for i in range(args.n):
                cursor.execute(sql, values(i), prepare=True)
            wall = time.perf_counter() - wall
            got[key].append((args.n / wall, (on_cpu_ns() - cpu) / args.n / 1000,
                             (wal() - lsn) / args.n))
    conn.close()
    floor = statistics.median(rate for rate, _, _ in got[keys[0]])
    print(f"{'':34} {'pushes/s':>9} {'/ floor':>8} {'server cpu us':>14} {'WAL B':>6}")
    for key, runs in got.items():
        rate = statistics.median(x for x, _, _ in runs)
        cpu = statistics.median(x for _, x, _ in runs)
        size = statistics.median(x for _, _, x in runs)
        print(f"{key:34} {rate:9,.0f} {rate / floor:7.2f}x {cpu:14.1f} {size:6.0f}")


if __name__ == "__main__":
    main()
