"""What the job history costs a drain: LATERITE_QUEUE_HISTORY on against off.

    python bench/history_cost.py [--store laterite_pg|laterite_redis|laterite_sqlite]
                                 [--n 5000] [--rounds 6]

In this process, against a scratch store of the bench's project (database
`bench_<store>_hist`, dropped at the end; Redis: db 5 of $BENCH_REDIS_URL's server,
flushed), each round pushes N jobs (push_many, not timed), then drains them with
`testing.run_jobs()` (claim, run, settle, as a worker does: the settle is where the
records are written; on Redis the records' move to the database at the end of the
drain is timed too); the rows take turns (off on, on off, ...), so a load that comes
and goes on a shared machine falls on both alike. Prints the medians: wall and CPU
microseconds per job drained, and the drain rate with history on over off.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if __package__ in (None, ""):  # `python bench/history_cost.py`
    sys.path.insert(0, str(ROOT))

from bench.scratch import in_scratch_store  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--store", default="laterite_pg")
    parser.add_argument("--n", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=6)
    args = parser.parse_args()
    in_scratch_store(args.store, "_hist", "redis://127.0.0.1:6379/5", "/tmp/hist-bench",
                     lambda: run(args))


def run(args: argparse.Namespace) -> None:
    import django

    django.setup()
    from django.core.management import call_command
    from django.test import override_settings

    call_command("migrate", verbosity=0)
    from laterite_django import job
    from laterite_django.models import JobRecord
    from laterite_django.stores import get_store
    from laterite_django.testing import run_jobs

    @job("bench.history_noop")
    def noop(i, order_id):
        pass

    rows = {"off": None, "on": {"keep": "7d"}}
    store = get_store()
    store.clear()
    calls = [(i, 8800 + i) for i in range(args.n)]
    for history in rows.values():  # warm up: connection, statements, scripts
        with override_settings(LATERITE_QUEUE_HISTORY=history):
            noop.push_many(calls[:200])
            run_jobs()
    timed: dict[str, list[tuple[float, float]]] = {key: [] for key in rows}
    keys = list(rows)
    for r in range(args.rounds):
        for key in keys if r % 2 == 0 else keys[::-1]:
            with override_settings(LATERITE_QUEUE_HISTORY=rows[key]):
                noop.push_many(calls)
                wall, cpu = time.perf_counter(), time.process_time()
                drained = run_jobs()
                timed[key].append((time.perf_counter() - wall, time.process_time() - cpu))
            assert drained == args.n, (key, drained)
    recorded = JobRecord.objects.count()
    per = {key: [statistics.median(t[k] for t in timed[key]) / args.n * 1e6 for k in range(2)]
           for key in rows}
    for key, (wall, cpu) in per.items():
        print(f"{args.store} history {key:3} drain wall {wall:6.1f} us/job "
              f"({1e6 / wall:,.0f}/s) cpu {cpu:6.1f} us/job")
    print(f"{args.store} on/off: drain {per['off'][0] / per['on'][0]:.3f}x (jobs per second; "
          f"medians of {args.rounds} alternating rounds of {args.n}); {recorded:,} records "
          f"written")
    store.clear()


if __name__ == "__main__":
    main()
