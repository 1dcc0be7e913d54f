"""What one `noop.push(i)` costs the pushing process: CPU microseconds and Python calls.

    python bench/profile_push.py [--store laterite_pg|laterite_redis|laterite_sqlite]
                                 [--n 5000] [--rounds 5] [--atomic] [--top 25]

(`--store laterite_pg_encrypted` or `laterite_redis_encrypted`: the job pushed is the
same no-op with `@job(encrypt=True)`, as in bench/run.py's rows of those names.)

Pushes N no-op jobs in this process against a scratch store of the bench's
project (database `bench_<store>_pushprof`, dropped at the end; Redis: db 4 of
$BENCH_REDIS_URL's server, flushed), `--rounds` times, the rows taking turns
(a b c, c b a, ...), and prints the medians: wall and CPU microseconds per push
(CPU time: what the client spends, far less noisy than wall time on a shared
machine); the server's CPU microseconds per push (the PostgreSQL backend's, or
the redis-server process's, from /proc/<pid>/task/*/schedstat: the server must
run on this machine; time the machine's other work takes from it is not counted)
and the two added up; then Python calls per push under cProfile (a count the
machine's load does not change) and, with --top, the functions that cost most.
On PostgreSQL the same is measured for the floor: a bare psycopg INSERT per job
(`bench/systems/floor_pg.py`); on Redis, for a bare LPUSH per job and, when Huey
is installed, Huey's enqueue (db 5, flushed). With --atomic, each push runs in
its own `transaction.atomic()` (a request under ATOMIC_REQUESTS).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if __package__ in (None, ""):  # `python bench/profile_push.py`
    sys.path.insert(0, str(ROOT))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--store", default="laterite_pg")
    parser.add_argument("--n", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--atomic", action="store_true")
    parser.add_argument("--top", type=int, default=0)
    args = parser.parse_args()
    os.environ.update(
        BENCH_SYSTEM=args.store, BENCH_DB_SUFFIX="_pushprof",
        DJANGO_SETTINGS_MODULE="bench.djproject.settings",
        BENCH_REDIS_URL=os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/4"),
        BENCH_RUN_DIR=os.environ.get("BENCH_RUN_DIR", "/tmp/push"),
    )
    Path(os.environ["BENCH_RUN_DIR"]).mkdir(parents=True, exist_ok=True)
    postgres = args.store != "laterite_sqlite"
    name = f"bench_{args.store}_pushprof"
    if postgres:
        import psycopg

        with psycopg.connect("host=127.0.0.1 user=postgres dbname=postgres",
                             autocommit=True) as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {name}")
            admin.execute(f"CREATE DATABASE {name}")
    try:
        run(args, postgres, name)
    finally:
        from django.db import connections

        connections.close_all()
        if postgres:
            with psycopg.connect("host=127.0.0.1 user=postgres dbname=postgres",
                                 autocommit=True) as admin:
                admin.execute(f"DROP DATABASE IF EXISTS {name}")


def run(args: argparse.Namespace, postgres: bool, name: str) -> None:
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection, transaction

    call_command("migrate", verbosity=0)
    import laterite_django
    from bench.laterite_app import jobs
    from laterite_django.stores import get_store

    # The *_encrypted rows: the same no-op job with @job(encrypt=True).
    noop = jobs.noop_encrypted if args.store.endswith("_encrypted") else jobs.noop

    print(f"laterite_django from {Path(laterite_django.__file__).parent}", file=sys.stderr)
    store = get_store()

    def laterite(ids: range) -> None:
        push = noop.push
        if args.atomic:
            atomic = transaction.atomic
            for i in ids:
                with atomic():
                    push(i)
        else:
            for i in ids:
                push(i)

    floor = None
    if postgres and args.store == "laterite_pg":
        import psycopg

        raw = psycopg.connect(f"host=127.0.0.1 user=postgres dbname={name}", autocommit=True)
        raw.execute("CREATE TABLE floor_job (id bigserial PRIMARY KEY, payload jsonb NOT NULL, "
                    "claimed_at timestamptz, token bigint)")
        raw.execute("CREATE INDEX floor_job_waiting ON floor_job (id) WHERE claimed_at IS NULL")

        def floor(ids: range) -> None:
            dumps, execute = json.dumps, raw.execute
            for i in ids:
                execute("INSERT INTO floor_job (payload) VALUES (%s)", (dumps({"i": i}),))

    if args.store == "laterite_redis":
        floor, huey_push, flush_peers = redis_rows()

    def clear() -> None:
        if args.store == "laterite_redis":
            flush_peers()
        if args.store != "laterite_pg":
            store.clear()
            return
        with connection.cursor() as cursor:
            cursor.execute("TRUNCATE laterite_job")
        raw.execute("TRUNCATE floor_job")

    rows = {"laterite": laterite, **({"floor": floor} if floor else {})}
    if args.store == "laterite_redis" and huey_push is not None:
        rows["huey"] = huey_push
    timed: dict[str, list[tuple[float, float, float | None]]] = {key: [] for key in rows}
    for push in rows.values():
        push(range(200))  # warm up: connection, prepared statements, caches
    server = server_cpu_ns(args.store, connection, raw if args.store == "laterite_pg" else None)
    keys = list(rows)
    for r in range(args.rounds):
        for key in keys if r % 2 == 0 else keys[::-1]:
            push = rows[key]
            clear()
            on_server = server(key)
            wall, cpu = time.perf_counter(), time.process_time()
            push(range(args.n))
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            after = server(key)
            timed[key].append((wall, cpu, None if on_server is None or after is None
                               else (after - on_server) / 1e9))
    for key, push in rows.items():
        clear()
        profile = cProfile.Profile()
        profile.enable()
        push(range(args.n))
        profile.disable()
        stats = pstats.Stats(profile)
        calls = stats.total_calls / args.n  # type: ignore[attr-defined]
        wall = statistics.median(w for w, _, _ in timed[key]) / args.n * 1e6
        cpu = statistics.median(c for _, c, _ in timed[key]) / args.n * 1e6
        on_server = [s for _, _, s in timed[key] if s is not None]
        if on_server:
            both = statistics.median(c + s for _, c, s in timed[key] if s is not None)
            server_text = (f"server cpu {statistics.median(on_server) / args.n * 1e6:6.1f}  "
                           f"cpu in all {both / args.n * 1e6:6.1f}  ")
        else:
            server_text = "server cpu      -  "
        print(f"{key:9} wall {wall:6.1f} us/push ({1e6 / wall:,.0f}/s)  "
              f"cpu {cpu:6.1f} us/push  {server_text}calls {calls:6.1f}/push")
        if args.top and key == "laterite":
            out = io.StringIO()
            pstats.Stats(profile, stream=out).sort_stats("tottime").print_stats(args.top)
            print(out.getvalue())
    clear()
    if args.store == "laterite_pg":
        raw.close()


def server_cpu_ns(store: str, connection, raw):
    """A function of a row's key giving the CPU nanoseconds its server has used so
    far (None when the server's process is not on this machine): on PostgreSQL the
    backend of the row's connection (laterite's through Django, the floor's `raw`),
    on Redis the redis-server process (all its threads), which serves every row."""
    if store == "laterite_sqlite":
        return lambda key: None
    if store == "laterite_pg":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid()")
            pids = {"laterite": cursor.fetchone()[0]}
        pids["floor"] = raw.execute("SELECT pg_backend_pid()").fetchone()[0]
        return lambda key: schedstat_ns(pids[key], "postgres")
    import redis

    pid = redis.Redis.from_url(os.environ["BENCH_REDIS_URL"]).info("server")["process_id"]
    return lambda key: schedstat_ns(pid, "redis-server")


def schedstat_ns(pid: int, name: str) -> int | None:
    """CPU nanoseconds process `pid` has run, all its threads; None unless it is a
    process of this machine called `name` (a server elsewhere may share its pid)."""
    try:
        if not Path(f"/proc/{pid}/comm").read_text().startswith(name):
            return None
        return sum(int(stat.read_text().split()[0])
                   for stat in Path(f"/proc/{pid}/task").glob("*/schedstat"))
    except (OSError, ValueError, IndexError):
        return None


def redis_rows():
    """The Redis rows beside laterite's, on db 5 of the same server: the floor (a bare
    LPUSH of a small JSON payload per job, as bench/systems/floor_redis.py pushes) and
    Huey's enqueue when Huey is installed; and a function that empties db 5."""
    import redis

    url = os.environ["BENCH_REDIS_URL"].rsplit("/", 1)[0] + "/5"
    raw = redis.Redis.from_url(url)

    def floor(ids: range) -> None:
        dumps, lpush = json.dumps, raw.lpush
        for i in ids:
            lpush("floor", dumps({"i": i}))

    try:
        from huey import RedisHuey
    except ImportError:
        huey_push = None
    else:
        huey = RedisHuey("pushprof", url=url)

        @huey.task()
        def noop(i):
            return None

        def huey_push(ids: range) -> None:
            for i in ids:
                noop(i)

    return floor, huey_push, raw.flushdb


if __name__ == "__main__":
    main()
