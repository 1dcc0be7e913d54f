"""pgqueuer: push with its sync psycopg driver; workers as `pgq run` on asyncpg (batch 10)."""

import asyncio
import sys

import psycopg
from pgqueuer.db import PsycopgDriver, SyncPsycopgDriver
from pgqueuer.queries import Queries, SyncQueries

from bench.systems.base import Base, pkg_versions

__all__ = ["System"]


class System(Base):
    def versions(self):
        return {
            **pkg_versions("pgqueuer", "asyncpg", "psycopg"),
            "postgresql": self.pg_server_version(),
        }

    def setup(self):
        self.pg_create_database()

        async def install():
            conn = await psycopg.AsyncConnection.connect(self.dsn, autocommit=True)
            await Queries(PsycopgDriver(conn)).install()
            await conn.close()

        asyncio.run(install())
        self.conn = psycopg.connect(self.dsn, autocommit=True)
        self.q = SyncQueries(SyncPsycopgDriver(self.conn))

    def reset(self):
        self.pg_truncate("pgqueuer", "pgqueuer_log")

    def teardown(self):
        self.conn.close()
        self.pg_drop_database()

    def push_one(self, i):
        self.q.enqueue("noop", b"%d" % i)

    def push_bulk(self, ids):
        n = len(ids)
        self.q.enqueue(["noop"] * n, [b"%d" % i for i in ids], [0] * n)

    def fill(self, ids, how="head"):
        if how != "beside":
            return super().fill(ids, how)
        # Another entrypoint, which the workers do not register: they never ask for it.
        for k in range(0, len(ids), self.fill_chunk):
            chunk = ids[k : k + self.fill_chunk]
            n = len(chunk)
            self.q.enqueue(["backlog"] * n, [b"%d" % i for i in chunk], [0] * n)

    def clear(self):
        # pgqueuer's own clear for an entrypoint: a DELETE that logs each job
        # (without an entrypoint it would TRUNCATE, leaving no dead tuples).
        async def clear():
            conn = await psycopg.AsyncConnection.connect(self.dsn, autocommit=True)
            await Queries(PsycopgDriver(conn)).clear_queue("noop")
            await conn.close()

        asyncio.run(clear())

    def worker_commands(self, n):
        # pgqueuer.run() is what `pgq run` calls, with the same defaults.
        return [[sys.executable, "-m", "bench.systems.pgqueuer_jobs"]] * n
