"""Procrastinate app and task, shared by the pusher and the workers."""

import os

from procrastinate import App, PsycopgConnector

from bench.systems._record import record

__all__ = ["app", "noop"]

app = App(connector=PsycopgConnector(conninfo=os.environ["BENCH_PG_DSN"]))


@app.task(name="noop")
async def noop(i):
    record(i)
