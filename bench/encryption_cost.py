"""What encrypted arguments cost: push one and drain, plain against `encrypt=True`.

    python bench/encryption_cost.py [--store laterite_pg|laterite_redis|laterite_sqlite]
                                    [--n 3000] [--rounds 7]

In this process, against a scratch store of the bench's project (database
`bench_<store>_enc`, dropped at the end; Redis: db 4 of $BENCH_REDIS_URL's server,
flushed), each row pushes N jobs one `push` at a time with the same arguments (an
id, an e-mail address, a token), then drains them with `testing.run_jobs()` (claim,
decrypt, run, settle, as a worker does); the rows take turns (a b, b a, ...). Prints
the medians: wall and CPU microseconds per push and per job drained, and the ratio
of pushes per second, encrypted over plain. Then each push call timed alone, the
two jobs' calls interleaved one by one (steadier on a shared machine): the median
call of each, and their ratio.
"""

from __future__ import annotations

import argparse
import base64
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if __package__ in (None, ""):  # `python bench/encryption_cost.py`
    sys.path.insert(0, str(ROOT))

from bench.scratch import in_scratch_store  # noqa: E402

ARGS = ("ann.example@example.org", "tok-3f9a7c1e5b2d")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--store", default="laterite_pg")
    parser.add_argument("--n", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    in_scratch_store(args.store, "_enc", "redis://127.0.0.1:6379/4", "/tmp/enc-bench",
                     lambda: run(args))


def run(args: argparse.Namespace) -> None:
    import django
    from django.conf import settings

    django.setup()
    settings.LATERITE_QUEUE_ENCRYPTION_KEYS = [
        {"id": "bench", "key": base64.b64encode(os.urandom(32)).decode()}]
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from laterite_django import job
    from laterite_django.stores import get_store
    from laterite_django.testing import run_jobs

    @job("bench.plain_args")
    def plain(i, email, token):
        pass

    @job("bench.encrypted_args", encrypt=True)
    def encrypted(i, email, token):
        pass

    rows = {"plain": plain, "encrypted": encrypted}
    store = get_store()
    store.clear()
    for pushed in rows.values():  # warm up: connection, statements, the keyring
        for i in range(200):
            pushed.push(i, *ARGS)
        run_jobs()
    timed: dict[str, list[tuple[float, float, float, float]]] = {key: [] for key in rows}
    keys = list(rows)
    for r in range(args.rounds):
        for key in keys if r % 2 == 0 else keys[::-1]:
            push = rows[key].push
            wall, cpu = time.perf_counter(), time.process_time()
            for i in range(args.n):
                push(i, *ARGS)
            push_wall, push_cpu = time.perf_counter() - wall, time.process_time() - cpu
            wall, cpu = time.perf_counter(), time.process_time()
            drained = run_jobs()
            drain_wall, drain_cpu = time.perf_counter() - wall, time.process_time() - cpu
            assert drained == args.n, (key, drained)
            timed[key].append((push_wall, push_cpu, drain_wall, drain_cpu))
    # Push one, the calls interleaved (plain, encrypted, plain, ...): each call timed,
    # so a load that comes and goes on a shared machine falls on both rows alike.
    calls: dict[str, list[float]] = {key: [] for key in rows}
    clock = time.perf_counter
    for i in range(args.n * args.rounds // 2):
        for key in keys if i % 2 == 0 else keys[::-1]:
            push = rows[key].push
            started = clock()
            push(i, *ARGS)
            calls[key].append(clock() - started)
        if i % 1000 == 999:
            run_jobs()
    run_jobs()
    one = {key: statistics.median(calls[key]) * 1e6 for key in rows}
    per = {key: [statistics.median(t[k] for t in timed[key]) / args.n * 1e6
                 for k in range(4)] for key in rows}
    for key, (push_wall, push_cpu, drain_wall, drain_cpu) in per.items():
        print(f"{args.store} {key:9} push wall {push_wall:6.1f} us ({1e6 / push_wall:,.0f}/s) "
              f"cpu {push_cpu:6.1f} us | drain wall {drain_wall:6.1f} us/job "
              f"({1e6 / drain_wall:,.0f}/s) cpu {drain_cpu:6.1f} us/job")
    print(f"{args.store} encrypted/plain: push one {per['plain'][0] / per['encrypted'][0]:.3f}x, "
          f"drain {per['plain'][2] / per['encrypted'][2]:.3f}x (pushes or jobs per second; "
          f"medians of {args.rounds} alternating rounds of {args.n})")
    print(f"{args.store} push one, interleaved calls: plain {one['plain']:.1f} us, encrypted "
          f"{one['encrypted']:.1f} us (medians of {len(calls['plain'])} calls each): "
          f"{one['plain'] / one['encrypted']:.3f}x")
    store.clear()


if __name__ == "__main__":
    main()
