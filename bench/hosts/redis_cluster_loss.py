"""What a Redis Cluster failover loses of the pushes it acknowledged, with and
without LATERITE_QUEUE_REDIS_WAIT.

    python -m bench.hosts.redis_cluster_loss [--port 7700] [--runs 2] [--late 0.5,3]

(Each run's cluster on ports of its own from --port+10, ten a run.)

A cluster of six of its own (bench/hosts/redis_cluster.py). Four pusher threads push
single jobs as fast as they can, each noting every id the store acknowledged; the
primary of the prefix's slot is SIGKILLed under them, with its replica in step, or
behind by each of --late seconds (SIGSTOPped that long first, then let go as the
primary dies: what the kernel's socket buffers held for it still reaches it, the
rest of what the primary had not sent dies with it). Once
the replica is promoted the pushers go on a moment, the killed node comes back as
its replica, and every acknowledged id is looked up: acknowledged but gone = lost.
Done with the wait off, then 2 s. Nothing of the database is used (plain jobs).
"""

from __future__ import annotations

import argparse
import signal
import threading
import time

import django
from django.conf import settings
from django.test import override_settings
from django.utils import timezone

from .redis_cluster import RedisClusterSet

__all__ = ["main"]

PUSHERS = 4


def configure(cluster: RedisClusterSet) -> None:
    settings.configure(
        INSTALLED_APPS=["django.contrib.contenttypes", "laterite_django"],
        DATABASES={"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}},
        CACHES={"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"},
                "cluster": cluster.cache_config()},
        USE_TZ=True, LATERITE_QUEUE_STORE="redis", LATERITE_QUEUE_REDIS_EPHEMERAL=True)
    django.setup()


def one_run(cluster: RedisClusterSet, prefix: str, wait: float | None, behind: float
            ) -> dict[str, int]:
    from laterite_django.core.values import NewJob
    from laterite_django.exceptions import StoreUnavailable
    from laterite_django.stores.redis.store import RedisStore

    acknowledged: list[int] = []
    refused = [0]
    stop = threading.Event()

    def push_forever() -> None:
        store = RedisStore(alias="cluster", prefix=prefix, cluster=True)
        while not stop.is_set():
            now = timezone.now()
            try:
                ids = store.push([NewJob(name="bench.noop", queue="default", payload="{}",
                                         available_at=now, pushed_at=now)])
                acknowledged.extend(i for i in ids if i)
            except StoreUnavailable:  # refused, or stored but not confirmed
                refused[0] += 1
                time.sleep(0.01)

    probe = RedisStore(alias="cluster", prefix=prefix, cluster=True)
    primary = int(probe.client.connection_pool.connection_kwargs["port"])
    replica = next(port for port in cluster.ports if port != primary  # its replica
                   and cluster.client(port).info("replication").get("master_port") == primary)
    threads = [threading.Thread(target=push_forever) for _ in range(PUSHERS)]
    for thread in threads:
        thread.start()
    time.sleep(1.0)
    if behind:
        cluster.procs[replica].send_signal(signal.SIGSTOP)
        time.sleep(behind)
    before = len(acknowledged)
    cluster.kill_primary(primary)
    if behind:
        cluster.procs[replica].send_signal(signal.SIGCONT)
    cluster.wait_for_failover(primary)
    cluster.restart(primary)
    time.sleep(1.0)
    stop.set()
    for thread in threads:
        thread.join()
    client = RedisStore(alias="cluster", prefix=prefix, cluster=True).client
    pipe = client.pipeline(transaction=False)
    for job_id in acknowledged:
        pipe.exists(f"{{{prefix}}}:job:{job_id}")
    lost = sum(1 for found in pipe.execute() if not found)
    return {"acknowledged": len(acknowledged), "before_kill": before, "lost": lost,
            "refused": refused[0]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, default=7700)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--late", default="0.5,3", help="seconds the replica lags, a list")
    args = parser.parse_args()
    print(f"{'wait':>6} {'replica':>10} {'acknowledged':>13} {'lost':>6} {'refused':>8}")
    configured = False
    port = args.port
    for wait in (None, 2.0):
        for behind in [0.0, *map(float, args.late.split(","))]:
            for run in range(args.runs):
                # A cluster on new ports each time: the store keeps its cluster client
                # (and what it knows of the topology) per alias and its nodes.
                port += 10
                with RedisClusterSet(port) as cluster:
                    if not configured:
                        configure(cluster)
                        configured = True
                    caches = {**settings.CACHES, "cluster": cluster.cache_config()}
                    with override_settings(CACHES=caches, LATERITE_QUEUE_REDIS_WAIT=wait):
                        got = one_run(cluster, f"loss{run}", wait, behind)
                print(f"{wait or 'off'!s:>6} {f'{behind:g} s late' if behind else 'in step':>10} "
                      f"{got['acknowledged']:>13} {got['lost']:>6} {got['refused']:>8}",
                      flush=True)


if __name__ == "__main__":
    main()
