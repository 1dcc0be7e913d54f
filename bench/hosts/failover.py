"""What a Redis failover loses, and what LATERITE_QUEUE_REDIS_WAIT costs.

    python -m bench.hosts.failover     # bench/results/scale-failover.json, and its part of scale.md

A primary, a replica and a Sentinel (bench/hosts/sentinel.py), PostgreSQL for the
failed list (the machine's, database `laterite_hosts_failover`). Loss: four
pushers push single jobs as fast as they can and write down each push Redis
acknowledged; the primary is SIGKILLed under them (with the replica in step, and
with the replica 0.5 s behind: paused that long first); once the Sentinel
promoted the replica, they go on a moment, then workers drain the queue and every
job writes its number down. Acknowledged but never run = lost. Done with
REDIS_WAIT off, then 0.5 s. Cost: 3,000 single pushes one after another, and 100
pushes of 1,000 jobs, with and without it.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from .sentinel import RedisSentinelSet

__all__ = ["main"]

ROOT = Path(__file__).resolve().parents[2]
DB = "laterite_hosts_failover"
PUSHERS = 4


def env(redis_set: RedisSentinelSet, run_dir: Path, wait: float | None) -> dict[str, str]:
    extra = {"HOSTS_REDIS_WAIT": str(wait)} if wait else {}
    return {**os.environ, "DJANGO_SETTINGS_MODULE": "bench.hosts.project.settings",
            "PYTHONPATH": str(ROOT), "HOSTS_STORE": "redis", "HOSTS_PG_NAME": DB,
            "HOSTS_SENTINEL": f"{redis_set.host}:{redis_set.ports['sentinel']}",
            "HOSTS_SENTINEL_SERVICE": redis_set.service, "HOSTS_RUN_DIR": str(run_dir),
            **extra}


def pusher(start: int, stop_file: str) -> None:
    """Push hosts.noop(start), (start+1)... one at a time until `stop_file` exists."""
    import django

    django.setup()
    from bench.hosts.project.jobs import noop
    from laterite_django.exceptions import PushNotReplicated, StoreUnavailable

    out = os.open(os.path.join(os.environ["HOSTS_RUN_DIR"], f"pushed-{os.getpid()}.txt"),
                  os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    i = start
    while not os.path.exists(stop_file):
        try:
            noop.push(i)
        except PushNotReplicated:
            os.write(out, f"unconfirmed {i}\n".encode())
        except StoreUnavailable:
            time.sleep(0.05)
            continue  # the same number again: it may or may not have been stored
        else:
            os.write(out, f"acked {i}\n".encode())
        i += 1


def loss(wait: float | None, lag: float) -> dict[str, Any]:
    """Push under a failover; with `lag`, the replica falls that far behind first (it
    is paused for `lag` seconds before the primary dies, as a replica behind a slow
    link or a busy disk is)."""
    run_dir = Path(tempfile.mkdtemp(prefix="laterite-failover-"))
    try:
        return _loss(run_dir, wait, lag)
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)


def _loss(run_dir: Path, wait: float | None, lag: float) -> dict[str, Any]:
    stop_file = str(run_dir / "stop")
    with RedisSentinelSet() as redis_set:
        e = env(redis_set, run_dir, wait)
        procs = [subprocess.Popen([sys.executable, "-m", "bench.hosts.failover", "push",
                                   str(k * 10_000_000), stop_file], cwd=ROOT, env=e)
                 for k in range(PUSHERS)]
        time.sleep(4)
        if lag:
            redis_set.pause_replica()
            time.sleep(lag)
        killed = time.monotonic()
        redis_set.kill_primary()
        if lag:
            redis_set.resume_replica()
        redis_set.wait_for_failover()
        failover = time.monotonic() - killed
        time.sleep(2)
        Path(stop_file).touch()
        for proc in procs:
            proc.wait(60)
        worker = subprocess.Popen([sys.executable, "-m", "django", "queue_work",
                                   "--processes", "2", "--stop-when-empty"], cwd=ROOT, env=e)
        worker.wait(600)
    acked: set[int] = set()
    unconfirmed: set[int] = set()
    ran: set[int] = set()
    for path in run_dir.glob("pushed-*.txt"):
        for line in path.read_text().splitlines():
            kind, number = line.split()
            (acked if kind == "acked" else unconfirmed).add(int(number))
    for path in run_dir.glob("ran-*.txt"):
        ran |= {int(line.split()[0]) for line in path.read_text().splitlines() if line}
    return {"measure": "failover", "redis_wait": wait, "replica_lag": lag,
            "pushed_acked": len(acked),
            "push_unconfirmed": len(unconfirmed), "failover_seconds": round(failover, 1),
            "acked_lost": len(acked - ran), "unconfirmed_lost": len(unconfirmed - ran)}


def cost(wait: float | None) -> dict[str, Any]:
    run_dir = Path(tempfile.mkdtemp(prefix="laterite-failover-"))
    try:
        with RedisSentinelSet() as redis_set:
            out = subprocess.run([sys.executable, "-m", "bench.hosts.failover",
                                  "cost-inner"], cwd=ROOT, env=env(redis_set, run_dir, wait),
                                 check=True, capture_output=True, text=True).stdout
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)
    return {"measure": "push cost", "redis_wait": wait, **json.loads(out)}


def cost_inner() -> None:
    import django

    django.setup()
    from bench.hosts.project.jobs import noop

    latencies = []
    for i in range(3000):
        began = time.perf_counter()
        noop.push(i)
        latencies.append(time.perf_counter() - began)
    latencies.sort()
    began = time.perf_counter()
    for k in range(100):
        noop.push_many([(k * 1000 + i,) for i in range(1000)])
    many = time.perf_counter() - began
    print(json.dumps({
        "single_pushes_per_s": round(len(latencies) / sum(latencies)),
        "single_p50_ms": round(1000 * latencies[len(latencies) // 2], 3),
        "single_p99_ms": round(1000 * latencies[int(len(latencies) * 0.99)], 3),
        "batched_jobs_per_s": round(100_000 / many),
    }))


def main() -> None:
    # A SIGTERM ends the run through its `finally` blocks: no server left behind.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    subprocess.run(["psql", "-h", "127.0.0.1", "-U", "postgres", "-qc",
                    f"DROP DATABASE IF EXISTS {DB}", "-c", f"CREATE DATABASE {DB}"], check=True)
    subprocess.run([sys.executable, "-m", "django", "migrate", "-v0"], cwd=ROOT, check=True,
                   env={**os.environ, "DJANGO_SETTINGS_MODULE": "bench.hosts.project.settings",
                        "PYTHONPATH": str(ROOT), "HOSTS_PG_NAME": DB})
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    results: list[dict[str, Any]] = []
    try:
        for wait in (None, 0.5):
            results.append(cost(wait))
            print(json.dumps(results[-1]), flush=True)
        for lag in (0.0, 0.5):
            for wait in (None, 0.5):
                for _ in range(2):
                    results.append(loss(wait, lag))
                    print(json.dumps(results[-1]), flush=True)
        out = ROOT / "bench" / "results" / "scale"
        (out.parent / "scale-failover.json").write_text(
            json.dumps({"started": started, "results": results}, indent=1))
        scale = out.with_suffix(".json")
        if scale.exists():  # bench/results/scale.md shows both
            from .report import write

            data = json.loads(scale.read_text())
            write(out, data["started"], data["results"])
    finally:
        subprocess.run(["psql", "-h", "127.0.0.1", "-U", "postgres", "-qc",
                        f"DROP DATABASE IF EXISTS {DB}"], check=False)


if __name__ == "__main__":
    if sys.argv[1:2] == ["push"]:
        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bench.hosts.project.settings")
        pusher(int(sys.argv[2]), sys.argv[3])
    elif sys.argv[1:2] == ["cost-inner"]:
        cost_inner()
    else:
        main()
