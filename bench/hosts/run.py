"""The multi-host runs: 1 to 4 simulated hosts x 4 worker processes on one store.

    python -m bench.hosts                      # everything: bench/results/scale.md, .svg, .json
    python -m bench.hosts --jobs 20000 --hosts 1,4 --stores redis --no-faults   # a part

Needs root (network namespaces), PostgreSQL 15's binaries (/usr/lib/postgresql/15),
redis-server. The run makes a bridge with the services' address, one namespace per
host, its own PostgreSQL cluster and redis-server bound on the bridge (so restarting
them disturbs nothing else on the machine), and removes all of it at the end, or
when it fails.

Per store, per number of hosts: pushers (one per host) push the jobs over their
links, workers (`queue_work --processes 4` per host) drain them; every job writes
its number to a file of its process's own, so the run checks that every job ran,
and counts the ones that ran twice. The fault runs (4 hosts) cut one host's link
for twice retry_after, SIGKILL one host's processes, or restart the store under
all of them, once a quarter of the jobs ran.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import psutil

from .netns import Host, Network
from .pgbouncer import PgBouncer
from .procs import free_port, wait_until
from .services import OwnPostgres, OwnRedis

__all__ = ["main"]

ROOT = Path(__file__).resolve().parents[2]
PROCESSES = 4
BATCH = 20  # queue_work's --batch: the most jobs one worker process holds
RETRY_AFTER = 10.0
DB = "laterite_hosts"


class Harness:
    """The network, the store servers and the processes of one whole run."""

    def __init__(self, hosts: int) -> None:
        self.net = Network(hosts, tag="lhb")
        self.pg: OwnPostgres | None = None
        self.redis: OwnRedis | None = None
        self.bouncer: PgBouncer | None = None
        self.run_dir = Path(tempfile.mkdtemp(prefix="laterite-hosts-run-"))
        self.cpu_before_restart = 0.0

    def __enter__(self) -> Harness:
        try:
            self.net.create()
            self.pg = OwnPostgres(self.net.server, free_port(self.net.server)).start()
            self.redis = OwnRedis(self.net.server, free_port(self.net.server)).start()
            self.bouncer = PgBouncer(server_host=self.net.server, server_port=self.pg.port,
                                     listen=self.net.server, pool_size=20).start()
            self.pg.psql(f"CREATE DATABASE {DB}_template")
            self._django("migrate", "-v0", name=f"{DB}_template")
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.net.destroy()
        for service in (self.bouncer, self.pg, self.redis):
            if service is not None:
                service.stop()
        shutil.rmtree(self.run_dir, ignore_errors=True)

    def env(self, store: str, name: str = DB) -> dict[str, str]:
        """The environment of a host's processes; store `pgbouncer` is the database store
        through PgBouncer (transaction pooling), LISTEN on a direct connection."""
        assert self.pg is not None and self.redis is not None and self.bouncer is not None
        pooled = {"HOSTS_LISTEN_PORT": str(self.pg.port)} if store == "pgbouncer" else {}
        return {
            **os.environ,
            **pooled,
            "DJANGO_SETTINGS_MODULE": "bench.hosts.project.settings",
            "PYTHONPATH": str(ROOT),
            "HOSTS_STORE": "redis" if store == "redis" else "database",
            "HOSTS_PG_HOST": self.net.server,
            "HOSTS_PG_PORT": str(self.bouncer.port if store == "pgbouncer" else self.pg.port),
            "HOSTS_PG_NAME": name,
            "HOSTS_REDIS_URL": f"redis://{self.net.server}:{self.redis.port}/0",
            "HOSTS_RETRY_AFTER": str(RETRY_AFTER),
            "HOSTS_RUN_DIR": str(self.run_dir),
        }

    def _django(self, *argv: str, name: str = DB) -> str:
        return subprocess.run([sys.executable, "-m", "django", *argv], cwd=ROOT,
                              env=self.env("database", name), check=True,
                              capture_output=True, text=True).stdout

    def reset(self) -> None:
        """A fresh database (from the migrated template), an empty Redis, no records."""
        assert self.pg is not None and self.redis is not None
        self.pg.psql(f"DROP DATABASE IF EXISTS {DB} WITH (FORCE)")
        self.pg.psql(f"CREATE DATABASE {DB} TEMPLATE {DB}_template")
        import redis

        redis.Redis(host=self.net.server, port=self.redis.port).flushall()
        for path in self.run_dir.iterdir():
            path.unlink()
        self.cpu_before_restart = 0.0

    def store_cpu(self, store: str) -> float:
        """CPU seconds of the store's processes, those of a run before a restart too."""
        assert self.pg is not None and self.redis is not None
        if store == "redis":
            now = self.redis.cpu_seconds()
        else:
            now = self.pg.cpu_seconds()
            if store == "pgbouncer" and self.bouncer is not None and self.bouncer.proc:
                times = psutil.Process(self.bouncer.proc.pid).cpu_times()
                now += times.user + times.system
        return now + self.cpu_before_restart

    def counts(self, store: str) -> tuple[int, int]:
        """(jobs waiting or delayed, jobs claimed) in the store, and the failed rows."""
        assert self.pg is not None and self.redis is not None
        if store != "redis":
            out = self.pg.psql("SELECT count(*) FILTER (WHERE token IS NULL), "
                               "count(*) FILTER (WHERE token IS NOT NULL) FROM laterite_job",
                               DB)
            waiting, claimed = (int(x) for x in out.strip().split("|"))
            return waiting, claimed
        import redis

        client = redis.Redis(host=self.net.server, port=self.redis.port, socket_timeout=5)
        waiting = claimed = 0
        for key in client.scan_iter(match="hosts:queue:*", count=1000):
            kind = key.decode().rsplit(":", 1)[-1]
            size = client.zcard(key) if client.type(key) == b"zset" else 0
            if kind in ("waiting", "delayed", "ready", "default"):
                waiting += size
            elif kind in ("running", "claimed"):
                claimed += size
        return waiting, claimed

    def failed(self) -> int:
        assert self.pg is not None
        return int(self.pg.psql("SELECT count(*) FROM laterite_failed_job", DB).strip() or 0)

    def ran(self) -> tuple[Counter, float, float]:
        """How often each job ran, and the first and last finishing times."""
        counts: Counter = Counter()
        first, last = float("inf"), 0.0
        for path in self.run_dir.glob("ran-*.txt"):
            for line in path.read_text().splitlines():
                parts = line.split()
                if len(parts) != 2:
                    continue  # a line cut short by a SIGKILL
                counts[int(parts[0])] += 1
                at = float(parts[1])
                first, last = min(first, at), max(last, at)
        return counts, first, last

    def ran_count(self) -> int:
        """Jobs run so far (lines written), a cheap look during the run."""
        return sum(path.read_bytes().count(b"\n") for path in self.run_dir.glob("ran-*.txt"))


def _popen_logged(host: Host, argv: list[str], env: dict[str, str], log: Path
                  ) -> subprocess.Popen:
    with log.open("a") as out:
        return host.popen(argv, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)


def one_run(h: Harness, store: str, hosts: int, jobs: int, *, slow_every: int = 0,
            slow_seconds: float = 0.0, fault: str | None = None, logs: Path) -> dict[str, Any]:
    """Push `jobs` from `hosts` hosts, drain them with their workers; what it measured."""
    h.reset()
    active = h.net.hosts[:hosts]
    env = h.env(store)
    # Push: one pusher per host, its share of the numbers.
    share = -(-jobs // hosts)
    began = time.monotonic()
    pushers = [
        _popen_logged(host, [sys.executable, "-m", "bench.hosts.push", str(i * share),
                             str(max(0, min(share, jobs - i * share))), str(slow_every),
                             str(slow_seconds)], env, logs / f"push-{host.namespace}.log")
        for i, host in enumerate(active)
    ]
    for proc in pushers:
        proc.wait()
    push_seconds = time.monotonic() - began
    acknowledged = 0
    for host in active:
        lines = (logs / f"push-{host.namespace}.log").read_text().split()
        acknowledged += int(lines[-2])
    waiting, _ = h.counts(store)
    for host in active:
        host.procs.clear()

    # Drain.
    cpu0, wall0 = h.store_cpu(store), time.monotonic()
    machine0 = psutil.cpu_times()
    for host in active:
        _popen_logged(host, [sys.executable, "-m", "django", "queue_work", "--processes",
                             str(PROCESSES)], env, logs / f"work-{host.namespace}.log")
    fault_note = ""
    if fault:
        wait_until(lambda: h.ran_count() >= jobs // 4, 600, "a quarter of the jobs",
                   every=0.2)
        fault_note = inject(h, store, fault, logs)
    deadline = time.monotonic() + 1800
    while True:
        waiting_now, claimed = h.counts(store)
        if waiting_now == 0 and claimed == 0:
            counts, _, _ = h.ran()
            if len(counts) >= acknowledged:
                break
        if time.monotonic() > deadline:
            raise TimeoutError(f"{store} x{hosts} {fault}: not drained "
                               f"({waiting_now} waiting, {claimed} claimed)")
        time.sleep(0.5)
    wall = time.monotonic() - wall0
    cpu = h.store_cpu(store) - cpu0
    machine1 = psutil.cpu_times()
    busy = (sum(machine1[:3]) - sum(machine0[:3])) / (
        sum(machine1) - sum(machine0)) if sum(machine1) > sum(machine0) else 0.0
    for host in active:
        h.net.kill(host, signal.SIGTERM)
    for host in active:
        for proc in host.procs:
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)
        host.procs.clear()
    counts, first, last = h.ran()
    twice = sum(1 for n in counts.values() if n > 1)
    missing = jobs - len([i for i in counts if 0 <= i < jobs])
    return {
        "store": store, "hosts": hosts, "processes": hosts * PROCESSES, "jobs": jobs,
        "slow_every": slow_every, "slow_seconds": slow_seconds, "fault": fault,
        "fault_note": fault_note,
        "acknowledged": acknowledged, "stored_after_push": waiting,
        "push_per_s": round(jobs / push_seconds) if push_seconds else None,
        "drain_seconds": round(wall, 2),
        "jobs_per_s": round(len(counts) / (last - first)) if last > first else None,
        "store_cpu_pct": round(100 * cpu / wall, 1),
        "machine_busy_pct": round(100 * busy, 1),
        "missing": missing, "ran_twice": twice,
        "ran_more": sum(1 for n in counts.values() if n > 2),
        "failed": h.failed(),
    }


def inject(h: Harness, store: str, fault: str, logs: Path) -> str:
    """Do `fault` to the run now; say what was done."""
    victim = h.net.hosts[0]
    if fault == "cut":
        h.net.cut(victim)
        time.sleep(2 * RETRY_AFTER)
        h.net.restore(victim)
        return f"{victim.namespace}'s link down for {2 * RETRY_AFTER:g} s"
    if fault == "kill":
        h.net.kill(victim, signal.SIGKILL)
        for proc in victim.procs:
            proc.wait(30)
        # Its supervisor and workers are gone; the other hosts take its claims back
        # after retry_after. Start it again, as an orchestrator would.
        victim.procs.clear()
        time.sleep(RETRY_AFTER)
        _popen_logged(victim, [sys.executable, "-m", "django", "queue_work", "--processes",
                               str(PROCESSES)], h.env(store), logs / f"work-{victim.namespace}.log")
        return f"SIGKILL to every process of {victim.namespace}, restarted after {RETRY_AFTER:g} s"
    if fault == "restart":
        h.cpu_before_restart = h.store_cpu(store)
        if store != "redis":
            assert h.pg is not None
            h.pg.restart("immediate")
            return "PostgreSQL stopped in immediate mode (as a crash) and started again"
        assert h.redis is not None
        h.redis.restart()
        return "redis-server SIGKILLed and started again on its append-only file"
    raise ValueError(fault)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.hosts", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=100_000)
    parser.add_argument("--hosts", default="1,2,3,4")
    parser.add_argument("--stores", default="database,pgbouncer,redis",
                        help="database, pgbouncer (the database store through PgBouncer: "
                        "4 hosts and the link cut only), redis")
    parser.add_argument("--fault-jobs", type=int, default=20_000)
    parser.add_argument("--no-faults", action="store_true")
    parser.add_argument("--no-slow", action="store_true")
    parser.add_argument("--out", default=str(ROOT / "bench" / "results" / "scale"))
    args = parser.parse_args(argv)
    # A SIGTERM ends the run through its `finally` blocks: nothing left behind.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    hosts = [int(x) for x in args.hosts.split(",")]
    stores = args.stores.split(",")
    results: list[dict[str, Any]] = []
    logs = Path(tempfile.mkdtemp(prefix="laterite-hosts-logs-"))
    out = Path(args.out)
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    with Harness(max([*hosts, 4])) as h:
        plan: list[dict[str, Any]] = []
        for store in stores:
            if store == "pgbouncer":
                plan.append({"store": store, "hosts": max(hosts), "jobs": args.jobs})
                if not args.no_faults:
                    plan.append({"store": store, "hosts": 4, "jobs": args.fault_jobs,
                                 "slow_every": 1, "slow_seconds": 0.002, "fault": "cut"})
                continue
            plan += [{"store": store, "hosts": n, "jobs": args.jobs} for n in hosts]
            if not args.no_slow:
                plan.append({"store": store, "hosts": max(hosts), "jobs": args.jobs,
                             "slow_every": 100, "slow_seconds": 0.1})
            if not args.no_faults:
                plan += [{"store": store, "hosts": 4, "jobs": args.fault_jobs,
                          "slow_every": 1, "slow_seconds": 0.002, "fault": fault}
                         for fault in ("cut", "kill", "restart")]
        for item in plan:
            print(f"run: {item}", flush=True)
            result = one_run(h, logs=logs, **item)
            print(json.dumps(result), flush=True)
            results.append(result)
            out.with_suffix(".json").write_text(json.dumps(
                {"started": started, "results": results}, indent=1))
    from .report import write

    write(out, started, results)
    print(f"wrote {out}.md, {out}.svg, {out}.json (logs in {logs})")


if __name__ == "__main__":
    main()
