"""pgqueuer worker: `python -m bench.systems.pgqueuer_jobs` runs `pgqueuer.run(create)`."""

import os
from contextlib import asynccontextmanager

import asyncpg
from pgqueuer import PgQueuer
from pgqueuer.db import AsyncpgDriver
from pgqueuer.models import Job

from bench.systems._record import record

__all__ = ["create"]


@asynccontextmanager
async def create():
    # asyncpg, pgqueuer's first driver: with the async psycopg driver its
    # notification watcher holds the connection for up to 1 s at a time, so
    # an idle worker took ~1 s to start a pushed job.
    conn = await asyncpg.connect(os.environ["BENCH_PG_URL"])
    pgq = PgQueuer(AsyncpgDriver(conn))

    @pgq.entrypoint("noop")
    async def noop(job: Job) -> None:
        record(int(job.payload))

    try:
        yield pgq
    finally:
        await conn.close()


if __name__ == "__main__":
    # What `pgq run` calls, with its defaults (batch size 10). The CLI itself
    # fails in pgqueuer 1.6.0 ('str' object has no attribute 'name' while it
    # sets up logging).
    import asyncio

    import pgqueuer

    asyncio.run(pgqueuer.run(create))
