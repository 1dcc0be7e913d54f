"""Profile one laterite worker draining no-op jobs, on each store, with pyinstrument.

    python bench/profile_worker.py [--n 3000] [--store laterite_pg,laterite_redis,laterite_sqlite]
                                   [--ref 2d1d5a0] [--cost [--rounds 5] [--metrics] [--vacuum]]
                                   [--batch 100]

With --cost, no profiler: each round drains N jobs unprofiled (wall and CPU
microseconds per job), then again under cProfile (Python function calls per
job, a count the machine's load does not change); with --ref the current tree
and the earlier commit alternate round by round, and the medians are printed.
With --metrics, the current tree with its metrics off and on (the worker's
counts handed to a metrics server's totals, as `queue_work --metrics-port`
does) alternate instead, and the ratio of their wall times is printed.
With --vacuum (PostgreSQL), the emptied job table is vacuumed before each
drain's pushes, as autovacuum or the workers' own vacuum may leave it.

Runs the worker loop in one process (as `queue_work --processes 1` does) and
prints, per store, where the time of a job goes: the claim, running the job,
settling it, and Python overhead. Needs the bench's PostgreSQL and Redis, and
pyinstrument in the running interpreter. With --ref, each store is profiled
again with laterite at that commit, in the virtualenv `bench/run.py --ref`
made (bench/.venvs/laterite-<commit>; pyinstrument must be installed there).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if __package__ in (None, ""):  # `python bench/profile_worker.py`
    sys.path.insert(0, str(ROOT))

from bench.systems import REF_PATH, slug  # noqa: E402

COST = """
import cProfile, json, pstats, time, django
django.setup()
from django.core.management import call_command
call_command("migrate", verbosity=0)
from laterite_django.management.commands.queue_work import keep_connections_open
from laterite_django.stores import get_store
from laterite_django.worker.loop import Worker
from bench.laterite_app.jobs import noop
keep_connections_open()
store = get_store()

def drain(profile):
    store.clear()
    if {vacuum}:  # the emptied table vacuumed, as autovacuum or the workers' own may
        from django.db import connection
        with connection.cursor() as cursor:
            cursor.execute("VACUUM laterite_job")
    noop.push_many([(i,) for i in range({n})])
    worker = Worker(["default"], stop_when_empty=True, batch={batch})
    if {metrics}:
        from laterite_django.worker.tally import Tally
        from laterite_django.metrics.totals import Totals
        worker.tally = Tally(Totals().add)
    wall, cpu = time.perf_counter(), time.process_time()
    if profile:
        profile.enable()
    worker.run()
    if profile:
        profile.disable()
    return worker.processed, time.perf_counter() - wall, time.process_time() - cpu

done, wall, cpu = drain(None)
profile = cProfile.Profile()
counted, _, _ = drain(profile)
print(json.dumps({{"wall_us": wall / done * 1e6, "cpu_us": cpu / done * 1e6,
                  "calls": pstats.Stats(profile).total_calls / counted}}))
"""


def cost(system: str, n: int, rounds: int, ref: str | None, metrics: bool = False,
         batch: int = 100, vacuum: bool = False) -> str:
    """Medians over `rounds` of wall and CPU per job and calls per job (and at `ref`,
    or with the metrics on)."""
    import json
    import statistics

    # (label, commit or None, metrics on): the variants alternate round by round.
    variants = [("current", None, False)]
    if ref:
        variants.append((ref, ref, False))
    if metrics:
        variants.append(("current, metrics on", None, True))
    found: dict[str, list[dict]] = {}
    for round_ in range(rounds):
        for label, which, on in variants if round_ % 2 == 0 else variants[::-1]:
            out = profile_one(system, n, which, code=COST.format(n=n, metrics=on, batch=batch,
                                                                  vacuum=vacuum))
            line = out.strip().splitlines()[-1] if out.strip() else ""
            try:
                found.setdefault(label, []).append(json.loads(line))
            except ValueError:
                return out
    lines = ["tree | wall us/job | CPU us/job | Python calls/job", "---|---|---|---"]
    medians = {}
    for label, rows in found.items():
        medians[label] = {key: statistics.median(row[key] for row in rows)
                          for key in ("wall_us", "cpu_us", "calls")}
        lines.append(" | ".join([label, *(f"{medians[label][key]:.1f}"
                                          for key in ("wall_us", "cpu_us", "calls"))]))
    if metrics:
        on, off = medians["current, metrics on"], medians["current"]
        lines.append(f"\nrate with metrics on / off: {off['wall_us'] / on['wall_us']:.3f} "
                     f"(per-round ratios: " + ", ".join(
                         f"{a['wall_us'] / b['wall_us']:.3f}" for a, b in
                         zip(found["current"], found["current, metrics on"], strict=True)) + ")")
    return "\n".join(lines)


def profile_one(system: str, n: int, ref: str | None = None, code: str | None = None,
                batch: int = 100) -> str:
    """Run the profile of `system` in a fresh interpreter and return its text report.

    With `ref`, laterite is the package installed in bench/.venvs/laterite-<ref>,
    run from the path that holds only the bench code (as bench/run.py does).
    """
    python, path = sys.executable, ROOT
    if ref:
        system = f"{system}@{ref}"
        python = str(ROOT / "bench" / ".venvs" / f"laterite-{ref}" / "bin" / "python")
        path = REF_PATH
        if not Path(python).exists() or not (REF_PATH / "bench").exists():
            return f"no virtualenv for {ref}: run `python bench/run.py --ref {ref}` first"
    env = dict(os.environ, BENCH_SYSTEM=system, DJANGO_SETTINGS_MODULE="bench.djproject.settings",
               PYTHONPATH=str(path), BENCH_RECORD="/dev/null")
    code = code or f"""
import time, django
django.setup()
from django.core.management import call_command
from django.db import connection
call_command("migrate", verbosity=0)
from laterite_django.management.commands.queue_work import keep_connections_open
from laterite_django.stores import get_store
from laterite_django.worker.loop import Worker
from bench.laterite_app.jobs import noop
import laterite_django
from pyinstrument import Profiler
print("laterite_django from", laterite_django.__path__[0])
keep_connections_open()
store = get_store()
store.clear()
noop.push_many([(i,) for i in range({n})])
worker = Worker(["default"], stop_when_empty=True, batch={batch})
profiler = Profiler(interval=0.0005)
started = time.perf_counter()
profiler.start()
worker.run()
profiler.stop()
elapsed = time.perf_counter() - started
rate = worker.processed / elapsed
print(f"{{worker.processed}} jobs in {{elapsed:.2f}} s: {{rate:,.0f}} jobs/s, "
      f"{{1e6 / rate:,.0f}} us per job (profiled)")
# An earlier commit's laterite sits in site-packages: show its frames as this tree's are.
print(profiler.output_text(unicode=False, color=False, show_all=False, timeline=False,
                           processor_options={{"show_regex": ".*/laterite_django/"}}))
"""
    if not system.startswith("laterite_sqlite"):
        subprocess.run(["psql", "-h", "127.0.0.1", "-U", "postgres", "-qc",
                        f"DROP DATABASE IF EXISTS bench_{slug(system)}"], check=False)
        subprocess.run(["psql", "-h", "127.0.0.1", "-U", "postgres", "-qc",
                        f"CREATE DATABASE bench_{slug(system)}"], check=True)
    else:
        (ROOT / "bench" / ".runs").mkdir(exist_ok=True)
    result = subprocess.run([python, "-c", code], env=env, cwd=path,
                            capture_output=True, text=True, timeout=600)
    return result.stdout + result.stderr[-3000:]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=3000)
    parser.add_argument("--store", default="laterite_pg,laterite_redis,laterite_sqlite")
    parser.add_argument("--ref", help="also profile laterite at this commit (short hash)")
    parser.add_argument("--cost", action="store_true",
                        help="no profiler: per-job wall, CPU and call counts, medians")
    parser.add_argument("--rounds", type=int, default=5, help="rounds for --cost")
    parser.add_argument("--metrics", action="store_true",
                        help="with --cost: the metrics off and on, alternating")
    parser.add_argument("--batch", type=int, default=100,
                        help="the worker's batch (queue_work --batch; 100 by default)")
    parser.add_argument("--vacuum", action="store_true",
                        help="with --cost on PostgreSQL: VACUUM the emptied job table before "
                             "each drain's pushes")
    args = parser.parse_args()
    if args.cost:
        for system in args.store.split(","):
            print(f"## {system} ({time.strftime('%Y-%m-%d %H:%M')} UTC, N={args.n}, "
                  f"medians of {args.rounds})\n")
            print(cost(system, args.n, args.rounds, args.ref, args.metrics, args.batch,
                       args.vacuum), "\n")
        return
    for system in args.store.split(","):
        for ref in (None, args.ref) if args.ref else (None,):
            name = f"{system}@{ref}" if ref else system
            print(f"## {name} ({time.strftime('%Y-%m-%d %H:%M')} UTC, N={args.n})\n")
            print("```")
            print(profile_one(system, args.n, ref, batch=args.batch).rstrip())
            print("```\n")


if __name__ == "__main__":
    main()
