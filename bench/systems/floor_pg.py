"""Bare psycopg floors: what PostgreSQL itself allows, with no library around it."""

import json
import sys

import psycopg

from bench.systems.base import Base, pkg_versions

__all__ = ["SCHEMA", "System"]

SCHEMA = """
CREATE TABLE floor_job (
    id bigserial PRIMARY KEY,
    payload jsonb NOT NULL,
    claimed_at timestamptz,
    token bigint
);
CREATE INDEX floor_job_waiting ON floor_job (id) WHERE claimed_at IS NULL;
"""

MODES = {"floor_pg": "delete", "floor_pg_update": "update", "floor_pg_batch": "batch"}


class System(Base):
    def __init__(self, *args):
        super().__init__(*args)
        self.mode = MODES[self.name]
        # Push figures are measured once, on the first floor row.
        self.measure_push = self.mode == "delete"
        self.measure_latency = self.mode != "batch"

    def versions(self):
        return {**pkg_versions("psycopg"), "postgresql": self.pg_server_version()}

    def setup(self):
        self.pg_create_database()
        self.conn = psycopg.connect(self.dsn, autocommit=True)
        self.conn.execute(SCHEMA)

    def reset(self):
        self.conn.execute("TRUNCATE floor_job RESTART IDENTITY")

    def teardown(self):
        self.conn.close()
        self.pg_drop_database()

    def push_one(self, i):
        self.conn.execute("INSERT INTO floor_job (payload) VALUES (%s)", (json.dumps({"i": i}),))

    def push_bulk(self, ids):
        self.conn.execute(
            "INSERT INTO floor_job (payload) SELECT unnest(%s::jsonb[])",
            ([json.dumps({"i": i}) for i in ids],),
        )

    def push_wake(self, i):
        # Same round trip as push_one, plus the NOTIFY that wakes an idle worker.
        self.conn.execute(
            "WITH j AS (INSERT INTO floor_job (payload) VALUES (%s) RETURNING id) "
            "SELECT pg_notify('floor_job', '') FROM j",
            (json.dumps({"i": i}),),
        )

    def clear(self):
        self.conn.execute("DELETE FROM floor_job")

    def worker_commands(self, n):
        return [[sys.executable, "-m", "bench.systems.floor_worker", "pg", self.mode]] * n
