"""Profile one laterite worker draining no-op jobs, on each store, with pyinstrument.

    python bench/profile_worker.py [--n 3000] [--store laterite_pg,laterite_redis,laterite_sqlite]
                                   [--ref 2d1d5a0]

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


def profile_one(system: str, n: int, ref: str | None = None) -> str:
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
import laterite_django
from pyinstrument import Profiler
print("laterite_django from", laterite_django.__path__[0])
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
    args = parser.parse_args()
    for system in args.store.split(","):
        for ref in (None, args.ref) if args.ref else (None,):
            name = f"{system}@{ref}" if ref else system
            print(f"## {name} ({time.strftime('%Y-%m-%d %H:%M')} UTC, N={args.n})\n")
            print("```")
            print(profile_one(system, args.n, ref).rstrip())
            print("```\n")


if __name__ == "__main__":
    main()
