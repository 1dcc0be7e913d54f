"""Profile one laterite worker draining no-op jobs, on each store, with pyinstrument.

    python bench/profile_worker.py [--n 3000] [--store laterite_pg,laterite_redis,laterite_sqlite]

Runs the worker loop in this process (as `queue_work --processes 1` does) and
prints, per store, where the time of a job goes: the claim, running the job,
settling it, and Python overhead. Needs the bench's PostgreSQL and Redis, and
pyinstrument in the running interpreter.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def profile_one(system: str, n: int) -> str:
    """Run the profile of `system` in a fresh interpreter and return its text report."""
    env = dict(os.environ, BENCH_SYSTEM=system, DJANGO_SETTINGS_MODULE="bench.djproject.settings",
               PYTHONPATH=str(ROOT), BENCH_RECORD="/dev/null")
    code = f"""
import time, django
django.setup()
from django.core.management import call_command
from django.db import connection
call_command("migrate", verbosity=0)
from laterite_django.management.commands.queue_work import keep_connections_open
from laterite_django.stores import get_store
from laterite_django.worker.loop import Worker
from bench.laterite_app.jobs import noop
from pyinstrument import Profiler
keep_connections_open()
store = get_store()
store.clear()
noop.push_many([(i,) for i in range({n})])
worker = Worker(["default"], stop_when_empty=True, batch=20)
profiler = Profiler(interval=0.0005)
started = time.perf_counter()
profiler.start()
worker.run()
profiler.stop()
elapsed = time.perf_counter() - started
rate = worker.processed / elapsed
print(f"{{worker.processed}} jobs in {{elapsed:.2f}} s: {{rate:,.0f}} jobs/s, "
      f"{{1e6 / rate:,.0f}} us per job (profiled)")
print(profiler.output_text(unicode=False, color=False, show_all=False, timeline=False))
"""
    if system != "laterite_sqlite":
        subprocess.run(["psql", "-h", "127.0.0.1", "-U", "postgres", "-qc",
                        f"DROP DATABASE IF EXISTS bench_{system}"], check=False)
        subprocess.run(["psql", "-h", "127.0.0.1", "-U", "postgres", "-qc",
                        f"CREATE DATABASE bench_{system}"], check=True)
    if system == "laterite_sqlite":
        (ROOT / "bench" / ".runs").mkdir(exist_ok=True)
    result = subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT,
                            capture_output=True, text=True, timeout=600)
    return result.stdout + result.stderr[-3000:]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=3000)
    parser.add_argument("--store", default="laterite_pg,laterite_redis,laterite_sqlite")
    args = parser.parse_args()
    for system in args.store.split(","):
        print(f"## {system} ({time.strftime('%Y-%m-%d %H:%M')} UTC, N={args.n})\n")
        print("```")
        print(profile_one(system, args.n).rstrip())
        print("```\n")


if __name__ == "__main__":
    main()
