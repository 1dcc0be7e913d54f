"""What saving `cx.iterate`'s cursor after each chunk costs a long job: rows/s with and
without it.

    python bench/iterate.py [--stores laterite_pg,laterite_sqlite,laterite_redis]
                            [--rows 1000000] [--chunk 500] [--rounds 5] [--out PATH.md]

For each store, in a process of its own (a scratch store of the bench's project:
database `--pg-db`, default `bench_iterate`, dropped at the end; SQLite in
$BENCH_RUN_DIR; Redis: db 3 of $BENCH_REDIS_URL's server, flushed), one loop
`for row in cx.iterate(source, chunk=N): total += ...` over `--rows` rows, from two
sources:

- range: a fetch function over 0..rows-1 (no table: what the loop itself costs);
- table: a table of `--rows` rows (an id and an integer) walked by keyset pagination
  as model instances (`cx.iterate(Row.objects.all(), by="pk")`), on the database of the
  store's project (PostgreSQL for the Redis store).

Each source runs three ways, the six rows taking turns in `--rounds` rounds (a b c ...,
... c b a, ...):

- without saving: `Checkpoints(load=None, save=None)` (the cursor kept in memory);
- with saving: the Checkpoints a worker gives a job it claimed (`worker.attempt.
  _checkpoints`: the cursor saved with the job under its claim by
  `store.save_checkpoint`, waited out if the store is down, sent behind the walk on
  PostgreSQL and Redis (resumable.CursorWriter: on a connection of its own while the
  next chunk is fetched, its answer read before that chunk is handed on), and the items
  done reported as progress), bound to a job pushed and claimed for that pass;
- with saving in the job's thread: the same, each save made and waited for between
  two chunks (as a job inside a transaction of the store's database saves, and as
  every save is made on SQLite, where both rows measure the same thing).

Prints, per store and source, the median rows/s of each way, the median over the
rounds of the ratio with / without (each round's two passes measured minutes apart at
most, so the machine's other work falls on both alike) and what saving costs per chunk
(the median of each round's difference, in microseconds); --out also writes it as
Markdown.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if __package__ in (None, ""):  # `python bench/iterate.py`
    sys.path.insert(0, str(ROOT))

from bench.profile_push import schedstat_ns  # noqa: E402

STORES = ("laterite_pg", "laterite_sqlite", "laterite_redis")
SOURCES = ("range", "table")
WAYS = ("without saving", "with saving", "with saving in the job's thread")
TABLE = "bench_iterate_row"
ADMIN = "host=127.0.0.1 user=postgres dbname=postgres"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stores", default=",".join(STORES))
    parser.add_argument("--store", help="measure this store in this process (internal)")
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--chunk", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--pg-db", default="bench_iterate")
    parser.add_argument("--out", help="also write the report as Markdown to this file")
    args = parser.parse_args()
    if args.store:
        print(json.dumps(measure_store(args)))
        return
    results = []
    for store in args.stores.split(","):
        if store not in STORES:
            raise SystemExit(f"--stores: {store!r} is not one of {', '.join(STORES)}")
        command = [sys.executable, __file__, "--store", store, "--rows", str(args.rows),
                   "--chunk", str(args.chunk), "--rounds", str(args.rounds),
                   "--pg-db", args.pg_db]
        print(f"{store}: {args.rounds} rounds of {args.rows:,} rows...", file=sys.stderr)
        done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
        if done.returncode != 0:
            raise SystemExit(f"{store} failed:\n{done.stderr[-3000:]}")
        results.append(json.loads(done.stdout.strip().splitlines()[-1]))
    text = report(results, args)
    print(text)
    if args.out:
        Path(args.out).write_text(text)


# -- one store, in its own process ---------------------------------------------------

def measure_store(args: argparse.Namespace) -> dict:
    os.environ.update(
        BENCH_SYSTEM=args.store, BENCH_PG_DB=args.pg_db,
        DJANGO_SETTINGS_MODULE="bench.djproject.settings",
        BENCH_REDIS_URL=os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/3"),
        BENCH_RUN_DIR=os.environ.get("BENCH_RUN_DIR", "/tmp/iterate"),
    )
    run_dir = Path(os.environ["BENCH_RUN_DIR"])
    run_dir.mkdir(parents=True, exist_ok=True)
    postgres = args.store != "laterite_sqlite"
    if postgres:
        import psycopg

        with psycopg.connect(ADMIN, autocommit=True) as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {args.pg_db}")
            admin.execute(f"CREATE DATABASE {args.pg_db}")
    else:
        for suffix in ("", "-wal", "-shm"):
            (run_dir / f"{args.store}.sqlite3{suffix}").unlink(missing_ok=True)
    try:
        return run(args)
    finally:
        from django.db import connections

        connections.close_all()
        if postgres:
            with psycopg.connect(ADMIN, autocommit=True) as admin:
                admin.execute(f"DROP DATABASE IF EXISTS {args.pg_db}")


def run(args: argparse.Namespace) -> dict:
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection, models

    from bench.laterite_app.jobs import noop
    from laterite_django.context import JobContext
    from laterite_django.core.checkpoint import Checkpoint
    from laterite_django.resumable import Checkpoints, CursorWriter
    from laterite_django.stores import get_store
    from laterite_django.worker.attempt import _checkpoints
    from laterite_django.worker.loop import Worker

    call_command("migrate", verbosity=0)
    store = get_store()
    store.clear()

    class Row(models.Model):
        value = models.IntegerField()

        class Meta:
            app_label = "laterite_app"
            db_table = TABLE
            managed = False

        def __str__(self) -> str:
            return f"row {self.pk}"

    with connection.schema_editor() as editor:
        editor.create_model(Row)
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(f"INSERT INTO {TABLE} (id, value) SELECT g, g %% 1000 "
                           f"FROM generate_series(1, %s) g", [args.rows])
            cursor.execute(f"VACUUM ANALYZE {TABLE}")
        else:
            cursor.execute(f"INSERT INTO {TABLE} (id, value) WITH RECURSIVE c(x) AS "
                           f"(SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < %s) "
                           f"SELECT x, x %% 1000 FROM c", [args.rows])

    rows = args.rows

    def numbers(cursor, n):
        start = cursor or 0
        end = min(start + n, rows)
        return range(start, end), (end if end < rows else None)

    def walk(source: str, checkpoints: Checkpoints) -> int:
        cx = JobContext(id=0, name="bench.iterate", queue="default", attempt=1,
                        pushed_at=datetime.now(UTC), checkpoints=checkpoints)
        total = 0
        if source == "range":
            for n in cx.iterate(numbers, chunk=args.chunk):
                total += n
        else:
            for row in cx.iterate(Row.objects.all(), by="pk", chunk=args.chunk):
                total += row.value
        return total

    worker = Worker(["default"], name="bench-iterate", store=store)

    backend = None
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid()")
            pid = cursor.fetchone()[0]
        if schedstat_ns(pid, "postgres") is not None:
            def backend() -> float:  # CPU seconds of this connection's server process
                return (schedstat_ns(pid, "postgres") or 0) / 1e9

    spent = {"save": 0.0, "save_cpu": 0.0}  # the pass's (one_pass)
    # A save sent behind the walk: the walk's part of it is the sending.
    CursorWriter.send = timed(CursorWriter.send, spent)  # type: ignore[method-assign]

    def one_pass(source: str, way: str) -> dict[str, float]:
        """One walk over every row: its seconds, the CPU seconds of this process and of
        its PostgreSQL backend (0 on SQLite), and the seconds and CPU seconds (this
        thread's) the walk spent saving the cursor (sending it and waiting for it,
        behind the walk) and reporting the progress."""
        claim = None
        spent.update(save=0.0, save_cpu=0.0)
        if way == "without saving":
            checkpoints = Checkpoints(load=None, save=None)
        else:
            noop.push(0)
            (claim,) = store.claim(["default"], worker.name, limit=1)
            checkpoints = _checkpoints(worker, claim)
            if way != "with saving":
                checkpoints._behind = None
            # Timed in the walk itself: the saves' share of the same seconds, which the
            # machine's other work moves far less than a ratio of two passes.
            checkpoints.save = timed(checkpoints.save, spent)  # type: ignore[method-assign]
            checkpoints._saved = timed(checkpoints._saved, spent)  # type: ignore[method-assign]
            checkpoints._report = timed(checkpoints._report, spent)
        server = backend() if backend else 0.0
        cpu, wall = time.process_time(), time.perf_counter()
        walk(source, checkpoints)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        server = (backend() if backend else 0.0) - server
        if claim is not None:
            saved = Checkpoint.parse(store.checkpoint(claim)).iterations
            assert saved[0].done == rows and saved[0].finished, saved
            store.delete([claim])
        return {"wall": wall, "cpu": cpu, "server_cpu": server, **spent}

    keys = [(source, way) for source in SOURCES for way in WAYS]
    for key in keys:  # warm up: connections, statements, the table in the cache
        if key[0] == "range" or key[1] == WAYS[0]:
            one_pass(*key)
    got: dict[str, list[dict[str, float]]] = {f"{s}|{w}": [] for s, w in keys}
    for r in range(args.rounds):
        for source, way in keys if r % 2 == 0 else keys[::-1]:
            got[f"{source}|{way}"].append(one_pass(source, way))
            figures = ", ".join(f"{k} {v:.2f}" for k, v in got[f"{source}|{way}"][-1].items())
            print(f"  round {r + 1} {source} {way}: {figures}", file=sys.stderr)
    store.clear()
    if args.store == "laterite_redis":
        from django_redis import get_redis_connection

        get_redis_connection("queue").flushdb()
    return {"store": args.store, "rows": rows, "chunk": args.chunk, "rounds": args.rounds,
            "vendor": connection.vendor, "passes": got}


def timed(call: Any, spent: dict[str, float]) -> Any:
    """`call`, adding the seconds and this thread's CPU seconds each call takes to
    spent["save"] and spent["save_cpu"]."""
    clock, cpu_clock = time.perf_counter, time.thread_time

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        start, cpu = clock(), cpu_clock()
        try:
            return call(*args, **kwargs)
        finally:
            spent["save"] += clock() - start
            spent["save_cpu"] += cpu_clock() - cpu

    return wrapper


# -- the report ----------------------------------------------------------------------

def report(results: list[dict], args: argparse.Namespace) -> str:
    lines = [
        "| store | source | saving | rows/s without saving | rows/s with saving | "
        "with / without: in the walk | pass to pass (each round's) | CPU, pass to pass | "
        "saving per chunk: us | CPU us, here + PostgreSQL |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for result in results:
        chunks = -(-result["rows"] // result["chunk"])
        passes = result["passes"]
        for source in SOURCES:
            without = passes[f"{source}|without saving"]
            rate0 = statistics.median(result["rows"] / p["wall"] for p in without)
            for way in WAYS[1:]:
                with_ = passes[f"{source}|{way}"]
                pairs = list(zip(without, with_, strict=True))
                ratios = [p0["wall"] / p1["wall"] for p0, p1 in pairs]
                cpu = statistics.median(
                    (p0["cpu"] + p0["server_cpu"]) / (p1["cpu"] + p1["server_cpu"])
                    for p0, p1 in pairs)
                inside = statistics.median((p["wall"] - p["save"]) / p["wall"] for p in with_)
                saving = statistics.median(p["save"] / chunks * 1e6 for p in with_)
                here = statistics.median(p["save_cpu"] / chunks * 1e6 for p in with_)
                server = statistics.median((p1["server_cpu"] - p0["server_cpu"]) / chunks * 1e6
                                           for p0, p1 in pairs)
                rate1 = statistics.median(result["rows"] / p["wall"] for p in with_)
                how = "behind the walk" if way == "with saving" else "in the job's thread"
                on_pg = result["store"] == "laterite_pg"
                lines.append(
                    f"| {result['store']} | {source} | {how} | {rate0:,.0f} | {rate1:,.0f} | "
                    f"**{inside:.3f}** | {statistics.median(ratios):.3f} "
                    f"({', '.join(f'{x:.2f}' for x in ratios)}) | {cpu:.3f} | "
                    f"{saving:,.0f} | {here:,.0f}{f' + {server:,.0f}' if on_pg else ''} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
