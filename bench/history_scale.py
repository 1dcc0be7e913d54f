"""Whether a big job history slows the claim, and what pruning a day of it costs
(PostgreSQL): a drain with history on beside 10^7 records against one beside none, then
the drop of one day's partition of 10^6 records.

    python bench/history_scale.py [--records 10000000] [--days 10] [--n 5000] [--rounds 6]

Two scratch databases of the bench's project (`bench_laterite_pg_hist_none` and
`bench_laterite_pg_hist_full`, dropped at the end) each get a worker process of their
own; the second is first filled with --records history records spread evenly over the
--days days before today, one partition per day as the workers would have made them
ahead (so a day holds records/days rows: 10^6 by default). The two then take turns
(none full, full none, ...): each round pushes N jobs (not timed) and drains them with
`testing.run_jobs()` under LATERITE_QUEUE_HISTORY = {"keep": "<days + 1>d"}, so each
drain also writes N records into today's partition. Printed: the medians of wall and
CPU microseconds per job, and the drain rate beside the records over beside none.

Then, on the full database, the prune that the workers' housekeeping runs
(`prune_history`) with the keep one day shorter, so that the oldest day falls out: its
wall time, the partitions dropped, the rows left, and the dead tuples that
pg_stat_user_tables counts in the job table and in the history's partitions left, before
and after it (the drop adds none: no DELETE runs but on the default partition, which is
empty).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if __package__ in (None, ""):  # `python bench/history_scale.py`
    sys.path.insert(0, str(ROOT))

from bench.scratch import ADMIN  # noqa: E402

SUFFIXES = {"none": "_hist_none", "full": "_hist_full"}

# One side's process: answers each line "drain" with the drain's wall and CPU seconds,
# "prune <keep days>" with the prune's figures.
SIDE = r"""
import json, sys, time, django
django.setup()
from django.core.management import call_command
from django.db import connection
from django.test import override_settings
call_command("migrate", verbosity=0)
from laterite_django import job
from laterite_django.stores import get_store
from laterite_django.testing import run_jobs

@job("bench.history_noop")
def noop(i, order_id):
    pass

from laterite_django.stores.database.history import RECORD_TABLE, partitions, prune_history
KEEP = {"keep": "%(keep)dd"}
with override_settings(LATERITE_QUEUE_HISTORY=KEEP):  # today's partition, as workers make it
    prune_history("default")
store = get_store()
store.clear()
calls = [(i, 8800 + i) for i in range(%(n)d)]
with override_settings(LATERITE_QUEUE_HISTORY=KEEP):  # warm up
    noop.push_many(calls[:200])
    run_jobs()
print("ready", flush=True)
for line in sys.stdin:
    word = line.split()
    if word[0] == "drain":
        with override_settings(LATERITE_QUEUE_HISTORY=KEEP):
            noop.push_many(calls)
            wall, cpu = time.perf_counter(), time.process_time()
            drained = run_jobs()
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        assert drained == len(calls), drained
        print(json.dumps([wall, cpu]), flush=True)
    elif word[0] == "prune":
        def dead_tuples():
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_stat_force_next_flush()")
                time.sleep(1)
                kept = partitions(cursor) + [RECORD_TABLE + "_default", "laterite_job"]
                cursor.execute("SELECT relname, n_dead_tup FROM pg_stat_user_tables "
                               "WHERE relname = ANY(%%s)", [kept])
                return dict(cursor.fetchall())
        before = dead_tuples()
        with override_settings(LATERITE_QUEUE_HISTORY={"keep": word[1] + "d"}):
            started = time.perf_counter()
            deleted, made, dropped = prune_history("default")
            took = time.perf_counter() - started
        after = dead_tuples()
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT count(*) FROM {RECORD_TABLE}")
            left = cursor.fetchone()[0]
        added = {name: after.get(name, 0) - before.get(name, 0) for name in after}
        print(json.dumps({"seconds": took, "deleted": deleted, "dropped": dropped,
                          "left": left, "dead_added": added}), flush=True)
"""


def fill(database: str, records: int, days: int) -> float:
    """Fill `database`'s history with `records` records over the `days` days before
    today, a partition per day; return the seconds it took."""
    import psycopg

    per_day = records // days
    started = time.perf_counter()
    with psycopg.connect(f"host=127.0.0.1 user=postgres dbname={database}",
                         autocommit=True) as db:
        for back in range(1, days + 1):
            day = db.execute("SELECT (current_date - %s::int)::timestamptz", [back]).fetchone()[0]
            name = f"laterite_job_record_p{day:%Y%m%d}"
            db.execute(f"CREATE TABLE IF NOT EXISTS {name} PARTITION OF laterite_job_record "
                       f"FOR VALUES FROM ('{day.isoformat()}') "
                       f"TO ('{(day.replace(hour=0) + _one_day()).isoformat()}')")
            db.execute(
                "INSERT INTO laterite_job_record (job_id, name, queue, args, kwargs, "
                "encrypted, status, attempts, pushed_at, started_at, finished_at, worker, "
                "error) SELECT g, 'bench.history_noop', 'default', "
                "jsonb_build_array(g, 8800 + g), '{}'::jsonb, NULL, 'succeeded', 1, "
                "t - interval '2 ms', t - interval '1 ms', t, 'bench:1', '' FROM "
                "(SELECT g, %s::timestamptz + (g %% 86400000) * interval '1 ms' AS t "
                " FROM generate_series(1, %s) AS g) AS s", [day, per_day])
            print(f"   {name}: {per_day:,} records "
                  f"({time.perf_counter() - started:.0f} s so far)", flush=True)
        db.execute("ANALYZE laterite_job_record")
    return time.perf_counter() - started


def _one_day():
    from datetime import timedelta

    return timedelta(days=1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=10_000_000)
    parser.add_argument("--days", type=int, default=10)
    parser.add_argument("--n", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=6)
    args = parser.parse_args()
    import psycopg

    names = {side: f"bench_laterite_pg{suffix}" for side, suffix in SUFFIXES.items()}
    with psycopg.connect(ADMIN, autocommit=True) as admin:
        for name in names.values():
            admin.execute(f"DROP DATABASE IF EXISTS {name}")
            admin.execute(f"CREATE DATABASE {name}")
    sides: dict[str, subprocess.Popen] = {}
    try:
        for side, suffix in SUFFIXES.items():
            env = dict(os.environ, BENCH_SYSTEM="laterite_pg", BENCH_DB_SUFFIX=suffix,
                       DJANGO_SETTINGS_MODULE="bench.djproject.settings",
                       PYTHONPATH=str(ROOT), BENCH_RECORD="/dev/null")
            sides[side] = subprocess.Popen(
                [sys.executable, "-c", SIDE % {"n": args.n, "keep": args.days + 1}],
                env=env, cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
            assert sides[side].stdout.readline().strip() == "ready"
        print(f"filling {names['full']} with {args.records:,} records over {args.days} days")
        took = fill(names["full"], args.records, args.days)
        print(f"   filled in {took:.0f} s")

        def ask(side: str, line: str):
            process = sides[side]
            process.stdin.write(line + "\n")
            process.stdin.flush()
            return json.loads(process.stdout.readline())

        timed: dict[str, list[list[float]]] = {side: [] for side in SUFFIXES}
        order = list(SUFFIXES)
        for r in range(args.rounds):
            for side in order if r % 2 == 0 else order[::-1]:
                timed[side].append(ask(side, "drain"))
        per = {side: [statistics.median(t[k] for t in timed[side]) / args.n * 1e6
                      for k in range(2)] for side in SUFFIXES}
        for side, (wall, cpu) in per.items():
            print(f"beside {side:4} history: drain wall {wall:6.1f} us/job "
                  f"({1e6 / wall:,.0f}/s) cpu {cpu:6.1f} us/job")
        ratios = [none[0] / full[0] for none, full in zip(timed["none"], timed["full"],
                                                            strict=True)]
        print(f"beside {args.records:,} records / beside none: drain "
              f"{per['none'][0] / per['full'][0]:.3f}x (medians of {args.rounds} alternating "
              f"rounds of {args.n}; per round: {', '.join(f'{x:.3f}' for x in ratios)})")
        # Keep one day shorter than the records span: the oldest day's end is then past.
        pruned = ask("full", f"prune {args.days - 1}")
        print(f"prune with keep {args.days - 1}d: {pruned['seconds'] * 1000:.0f} ms, dropped "
              f"{pruned['dropped']}, deleted {pruned['deleted']} rows, {pruned['left']:,} "
              f"records left; dead tuples the prune added: {pruned['dead_added']}")
    finally:
        for process in sides.values():
            process.stdin.close()
            process.wait(timeout=60)
        with psycopg.connect(ADMIN, autocommit=True) as admin:
            for name in names.values():
                admin.execute(f"DROP DATABASE IF EXISTS {name}")


if __name__ == "__main__":
    main()
