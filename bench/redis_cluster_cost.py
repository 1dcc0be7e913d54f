"""What the Redis store costs its server on a Redis Cluster, against one Redis.

    python bench/redis_cluster_cost.py [--n 3000] [--rounds 5] [--port 7600]

Starts its own servers on loopback ports from --port: one plain redis-server, and a
cluster of six (three primaries with a replica each, bench/hosts/redis_cluster.py).
Each round runs, in alternating order, N jobs through the store (a one-job push,
then a claim of one and its delete per job, as a busy worker settles and claims):

- single: one prefix on the plain server;
- cluster, one prefix: one prefix on the cluster (every key under its hash tag,
  one slot, so one primary serves all of it);
- cluster, three prefixes: three prefixes whose hash tags fall on the three
  primaries, N/3 jobs each, one after the other.

Prints per row the median client wall per job, and the server CPU per 1,000 jobs
from /proc/<pid>/task/*/schedstat: of the one server, or summed over the cluster's
primaries, with the busiest primary's share. The servers run on this machine (2
cores here): the figures are CPU time, not throughput, so that they say what the
store asks of its server whatever the client's speed. A primary's capacity is its
core divided by its CPU per job; spread over three primaries evenly, the cluster
carries three times one primary's rate if the jobs spread (three prefixes here: one
prefix stays on one primary, see docs/howto/redis-cluster.md).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if __package__ in (None, ""):  # `python bench/redis_cluster_cost.py`
    sys.path.insert(0, str(ROOT))

import django  # noqa: E402
from django.conf import settings  # noqa: E402
from django.utils import timezone  # noqa: E402

from bench.hosts.procs import wait_until  # noqa: E402
from bench.hosts.redis_cluster import REDIS, RedisClusterSet  # noqa: E402
from bench.profile_push import schedstat_ns  # noqa: E402


def configure(single_port: int, cluster: RedisClusterSet) -> None:
    settings.configure(
        INSTALLED_APPS=["django.contrib.contenttypes", "laterite_django"],
        DATABASES={"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}},
        CACHES={
            "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"},
            "single": {"BACKEND": "django_redis.cache.RedisCache",
                       "LOCATION": f"redis://127.0.0.1:{single_port}/0"},
            "cluster": cluster.cache_config(),
        },
        USE_TZ=True,
        LATERITE_QUEUE_STORE="redis",
        LATERITE_QUEUE_REDIS_EPHEMERAL=True,
    )
    django.setup()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--port", type=int, default=7600)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="laterite-bench-single-"))
    single = subprocess.Popen(
        [REDIS, "--port", str(args.port), "--bind", "127.0.0.1", "--save", "",
         "--appendonly", "no", "--dir", str(work)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        with RedisClusterSet(args.port + 1) as cluster:
            configure(args.port, cluster)
            wait_until(lambda: cluster.client(cluster.ports[0]).ping(), 10, "cluster")
            run(args, single.pid, cluster)
    finally:
        single.kill()
        single.wait(10)
        shutil.rmtree(work, ignore_errors=True)


def run(args: argparse.Namespace, single_pid: int, cluster: RedisClusterSet) -> None:
    from redis.cluster import RedisCluster

    from laterite_django.core.values import NewJob
    from laterite_django.stores.redis.store import RedisStore

    def job() -> NewJob:
        now = timezone.now()
        return NewJob(name="bench.noop", queue="default", payload='{"args": [1]}',
                      available_at=now, pushed_at=now)

    router = RedisCluster(host="127.0.0.1", port=cluster.ports[0])
    pids = {port: cluster.client(port).info("server")["process_id"]
            for port in cluster.primaries()}
    # Three prefixes whose tags fall on the three primaries.
    spread: dict[int, str] = {}
    for i in range(1000):
        port = router.get_node_from_key(f"{{bench{i}}}").port
        spread.setdefault(port, f"bench{i}")
        if len(spread) == len(pids):
            break
    router.close()

    def cpu(pid_list: list[int]) -> list[int]:
        return [schedstat_ns(pid, "redis-server") or 0 for pid in pid_list]

    def drain(store: RedisStore, n: int) -> None:
        for _ in range(n):
            store.push([job()])
        for _ in range(n):
            claims = store.claim(["default"], "bench")
            store.delete(claims)

    rows = {
        "single: one prefix, one redis-server": (
            [RedisStore(alias="single", prefix="bench")], [single_pid]),
        "cluster: one prefix (one slot, one primary)": (
            [RedisStore(alias="cluster", prefix="bench", cluster=True)], list(pids.values())),
        "cluster: three prefixes on three primaries": (
            [RedisStore(alias="cluster", prefix=p, cluster=True) for p in spread.values()],
            list(pids.values())),
    }
    for stores, _ in rows.values():
        for store in stores:
            drain(store, 100)  # warm up: scripts loaded, connections made
    got: dict[str, list[tuple[float, float, float]]] = {key: [] for key in rows}
    keys = list(rows)
    for r in range(args.rounds):
        for key in keys if r % 2 == 0 else keys[::-1]:
            stores, pid_list = rows[key]
            before, wall = cpu(pid_list), time.perf_counter()
            for store in stores:
                drain(store, args.n // len(stores))
            wall = time.perf_counter() - wall
            used = [b - a for a, b in zip(before, cpu(pid_list), strict=True)]
            per_k = sum(used) / args.n  # ns per job = us per 1,000 jobs
            got[key].append((wall / args.n * 1e6, per_k / 1000, max(used) / max(sum(used), 1)))
    print(f"{args.n} jobs a round, {args.rounds} rounds, medians")
    print(f"{'':46} {'wall us/job':>11} {'server CPU ms/1,000 jobs':>25} {'busiest':>8}")
    for key, runs in got.items():
        wall = statistics.median(w for w, _, _ in runs)
        ms = statistics.median(c for _, c, _ in runs)
        share = statistics.median(s for _, _, s in runs)
        print(f"{key:46} {wall:11.1f} {ms:25.2f} {share:8.0%}")


if __name__ == "__main__":
    main()
