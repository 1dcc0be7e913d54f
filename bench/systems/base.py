"""The adapter interface every system implements, and store helpers.

Imported inside a system's own virtualenv by `bench.driver`. An adapter:
  setup()            make a fresh store (database bench_<name>, Redis db)
  reset()            empty it between figures
  push_one(i)        push job `i` the way a user would, one at a time
  push_bulk(ids)     the system's bulk path (or a loop, has_bulk = False)
  settle_store()     before each drain repetition, workers idle: VACUUM (PostgreSQL)
  worker_commands(n) argv lists that start n worker processes
  teardown()         drop what setup made
For the scenarios (bench/scenarios.py; SCENARIO_ROWS in bench/systems says which
rows take part), the rows also have:
  fill(ids, how)     a backlog: "head" (waiting in the queue the workers serve),
                     "beside" (waiting where they do not look), "delayed", "failed"
  clear()            the system's own way to delete every waiting job
The driver does the measuring, the same way for every system.
"""

import importlib.metadata
import os
import sys
from pathlib import Path

from bench.systems import code_root, slug

__all__ = ["Base", "pg_dsn", "pkg_versions"]

PG_HOST = os.environ.get("BENCH_PG_HOST", "127.0.0.1")
PG_PORT = os.environ.get("BENCH_PG_PORT", "5432")
PG_USER = os.environ.get("BENCH_PG_USER", "postgres")
REDIS_HOST = os.environ.get("BENCH_REDIS_HOST", "127.0.0.1")
REDIS_PORT = int(os.environ.get("BENCH_REDIS_PORT", "6379"))
# Two runs at once (say one from another checkout): BENCH_DB_SUFFIX=_b gives this
# one databases bench_<system>_b (and SQLite files), BENCH_REDIS_DB_SHIFT=-7 moves
# its Redis dbs from 8-14 to 1-7.
DB_SUFFIX = os.environ.get("BENCH_DB_SUFFIX", "")
REDIS_DB_SHIFT = int(os.environ.get("BENCH_REDIS_DB_SHIFT", "0"))


def pg_dsn(dbname):
    return f"host={PG_HOST} port={PG_PORT} user={PG_USER} dbname={dbname}"


def pg_url(dbname):
    return f"postgresql://{PG_USER}@{PG_HOST}:{PG_PORT}/{dbname}"


def pkg_versions(*names):
    out = {}
    for name in names:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = "?"
    return out


class Base:
    has_bulk = True  # False: push_bulk is a loop of push_one (no bulk path)
    measure_push = True  # False: push figures come from another row
    measure_latency = True
    max_drain_jobs = None  # cap N for very slow drains
    poll_interval = 0.0  # seconds an idle worker may sleep: latency pushes are spread over it
    notes = ""  # shown under the table
    fill_chunk = 20_000  # jobs per bulk push while filling a backlog

    def __init__(self, desc, run_dir, record_path):
        self.desc = desc
        self.name = desc.name
        self.run_dir = Path(run_dir)
        self.record_path = str(record_path)
        self.db_name = f"bench_{slug(self.name)}{DB_SUFFIX}"
        self.dsn = pg_dsn(self.db_name)
        self.redis_db = None if desc.redis_db is None else desc.redis_db + REDIS_DB_SHIFT
        if self.redis_db is not None and not 0 <= self.redis_db <= 15:
            raise ValueError(f"BENCH_REDIS_DB_SHIFT puts {self.name} on Redis db {self.redis_db}")
        self.redis_url = f"redis://{REDIS_HOST}:{REDIS_PORT}/{self.redis_db or 0}"
        self.bin = Path(sys.executable).parent

    # -- the interface ------------------------------------------------------
    def versions(self):
        return {}

    def setup(self):
        pass

    def reset(self):
        pass

    def teardown(self):
        pass

    def settle_store(self):
        """Bring the store to the same state before each drain repetition.

        PostgreSQL runs here with autovacuum off: without a VACUUM the second and
        third repetitions would scan the dead rows the first one left behind.
        """
        if self.desc.store == "PostgreSQL":
            import psycopg

            with psycopg.connect(self.dsn, autocommit=True) as conn:
                conn.execute("VACUUM")

    def push_one(self, i):
        raise NotImplementedError

    def push_bulk(self, ids):
        for i in ids:
            self.push_one(i)

    def push_wake(self, i):
        """Push one job for the latency figure (floors add their wake-up here)."""
        self.push_one(i)

    def worker_commands(self, n):
        raise NotImplementedError

    def fill(self, ids, how="head"):
        """Put jobs `ids` in the store as a backlog, in bulk pushes of `fill_chunk`.

        head: waiting in the queue the workers serve, in push order; beside:
        waiting where the workers do not look (another queue); delayed: due in
        a day; failed: rows of the failed list. Rows implement what they support.
        """
        if how != "head":
            raise NotImplementedError(f"{self.name}: no {how!r} backlog")
        for k in range(0, len(ids), self.fill_chunk):
            self.push_bulk(ids[k : k + self.fill_chunk])

    def clear(self):
        """Delete every waiting job the way the system itself does (dead-tuple scenario)."""
        raise NotImplementedError

    def worker_env(self):
        env = dict(os.environ)
        env.update(
            PYTHONPATH=str(code_root(self.desc)),
            PYTHONUNBUFFERED="1",
            BENCH_RECORD=self.record_path,
            BENCH_SYSTEM=self.name,
            BENCH_PG_DSN=self.dsn,
            BENCH_PG_DB=self.db_name,
            BENCH_PG_URL=pg_url(self.db_name),
            BENCH_REDIS_URL=self.redis_url,
            BENCH_REDIS_DB=str(self.redis_db or 0),
            BENCH_RUN_DIR=str(self.run_dir),
        )
        return env

    # -- helpers ------------------------------------------------------------
    def pg_create_database(self):
        import psycopg

        with psycopg.connect(pg_dsn("postgres"), autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{self.db_name}" WITH (FORCE)')
            conn.execute(f'CREATE DATABASE "{self.db_name}"')

    def pg_drop_database(self):
        import psycopg

        with psycopg.connect(pg_dsn("postgres"), autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{self.db_name}" WITH (FORCE)')

    def pg_truncate(self, *tables):
        import psycopg

        with psycopg.connect(self.dsn, autocommit=True) as conn:
            conn.execute("TRUNCATE " + ", ".join(tables) + " RESTART IDENTITY CASCADE")

    def pg_dead_tuples(self):
        """(dead, live) tuples of the database's own tables, as its statistics count them."""
        import psycopg

        with psycopg.connect(self.dsn, autocommit=True) as conn:
            dead, live = conn.execute(
                "SELECT coalesce(sum(n_dead_tup), 0), coalesce(sum(n_live_tup), 0)"
                " FROM pg_stat_user_tables"
            ).fetchone()
        return int(dead), int(live)

    def pg_server_version(self):
        import psycopg

        with psycopg.connect(pg_dsn("postgres"), autocommit=True) as conn:
            return conn.execute("SHOW server_version").fetchone()[0].split()[0]

    def redis_client(self):
        import redis

        return redis.Redis(host=REDIS_HOST, port=REDIS_PORT, db=self.redis_db or 0)

    def redis_flush(self):
        r = self.redis_client()
        r.flushdb()
        r.close()

    def redis_server_version(self):
        r = self.redis_client()
        try:
            return r.info("server")["redis_version"]
        finally:
            r.close()
