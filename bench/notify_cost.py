"""What a push's NOTIFY costs PostgreSQL when pushes run side by side, and what
laterite's rule (notify only while a worker waits: `stores/database/postgres.MUST_NOTIFY`)
saves when none waits.

    python bench/notify_cost.py [--processes 4] [--n 1000] [--rounds 4]

Bare psycopg, in a scratch database (`bench_notify_cost`, dropped at the end):
`--processes` processes each INSERT `--n` rows one at a time (autocommit), three
ways in alternating rounds: a plain INSERT, the INSERT with `pg_notify` in its
RETURNING (every push notifies: the commits of notifying transactions go through
the notification queue one at a time), and the INSERT with laterite's rule, no
worker waiting. Prints the medians in pushes/s and the ratios to the plain INSERT.
"""

from __future__ import annotations

import argparse
import multiprocessing
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if __package__ in (None, ""):  # `python bench/notify_cost.py`
    sys.path.insert(0, str(ROOT))

from laterite_django.stores.database.postgres import MUST_NOTIFY  # noqa: E402

DSN = "host=127.0.0.1 user=postgres dbname={}"
NAME = "bench_notify_cost"
INSERT = "INSERT INTO job (queue, payload) VALUES (%s, %s) RETURNING id"
WAYS = {
    "plain INSERT": INSERT,
    "INSERT + NOTIFY": f"{INSERT}, pg_notify('laterite', queue)",
    "INSERT, laterite's rule": f"{INSERT}, CASE WHEN {MUST_NOTIFY} "
                               f"THEN pg_notify('laterite', queue) END",
}


def _push(sql: str, n: int, done: multiprocessing.Queue) -> None:
    import psycopg

    with psycopg.connect(DSN.format(NAME), autocommit=True) as connection:
        for _ in range(n):
            connection.execute(sql, ["default", '{"args": [1], "kwargs": {}}'],
                               prepare=True).fetchone()
    done.put(n)


def main() -> None:
    import psycopg

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--processes", type=int, default=4)
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args()
    with psycopg.connect(DSN.format("postgres"), autocommit=True) as admin:
        admin.execute(f"DROP DATABASE IF EXISTS {NAME}")
        admin.execute(f"CREATE DATABASE {NAME}")
    try:
        with psycopg.connect(DSN.format(NAME), autocommit=True) as connection:
            connection.execute("CREATE TABLE job (id bigserial PRIMARY KEY, queue varchar(100), "
                               "payload text)")
        rates: dict[str, list[float]] = {way: [] for way in WAYS}
        for round_ in range(args.rounds):
            for way in list(WAYS) if round_ % 2 == 0 else list(WAYS)[::-1]:
                done: multiprocessing.Queue = multiprocessing.Queue()
                started = time.perf_counter()
                procs = [multiprocessing.Process(target=_push, args=(WAYS[way], args.n, done))
                         for _ in range(args.processes)]
                for proc in procs:
                    proc.start()
                for proc in procs:
                    proc.join()
                rates[way].append(args.processes * args.n / (time.perf_counter() - started))
        base = statistics.median(rates["plain INSERT"])
        print(f"{args.processes} processes x {args.n} pushes, medians of {args.rounds} rounds")
        for way, values in rates.items():
            rate = statistics.median(values)
            print(f"{way:26} {rate:9,.0f} pushes/s  {rate / base:.2f}x")
    finally:
        with psycopg.connect(DSN.format("postgres"), autocommit=True) as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {NAME}")


if __name__ == "__main__":
    main()
