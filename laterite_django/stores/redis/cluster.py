"""The Redis store on a Redis Cluster (LATERITE_QUEUE_REDIS_CLUSTER = True).

How the store talks to the cluster: it builds redis-py's own cluster client,
`redis.cluster.RedisCluster`, from the queue's cache alias (its LOCATION, one URL or
a list of them: the startup nodes; its OPTIONS: PASSWORD, SOCKET_TIMEOUT,
SOCKET_CONNECT_TIMEOUT, CONNECTION_POOL_KWARGS), one per alias and process. Not
django-redis: django-redis 7 has no cluster client (its ShardClient hashes keys over
independent servers on the client's side, which is not Redis Cluster), and the
queue's alias is the queue's own anyway (alias.py), never used as a cache.

The key layout on a cluster: every key of the prefix `P` carries the hash tag `{P}`
(the store's prefix becomes `{P}`, keys.py), so every key of the queue lives in one
slot, on one primary. Every script touches keys of that slot alone, and declares
the tag as its one key (scripts.evalsha). The store sends its commands to that
primary through the node's own client (`node_client`), which the cluster client
keeps: the store's lone calls, pipelines, MULTI transactions, the idle workers'
BLPOP with a claim behind it and a push's WAIT all stay one round trip on one
connection, as on a single server. When that primary goes (a failover, a
resharding), its commands fail (a lost connection, MOVED, CLUSTERDOWN, READONLY on
a demoted primary): the store reports the store unavailable, as for any Redis
outage, and looks the slot's primary up again on its next call (`stale`), once the
cluster client has read the topology again.

One slot means one shard: correct on any cluster, but no spreading of one
prefix's load; two prefixes (two apps, or a queue per prefix) land on two slots.
The layout that spreads queues, `{P:queue}` per queue, is described in
docs/redis-cluster.md with what it changes for the operations that span queues.
"""

from __future__ import annotations

import os
import threading
from typing import TYPE_CHECKING, Any

from django.conf import settings as django_settings

from .alias import locations

try:
    from redis import exceptions as redis_errors
    from redis.cluster import ClusterNode, RedisCluster
    from redis.connection import parse_url
except ImportError:  # pragma: no cover - the redis store then refuses to start
    redis_errors = ClusterNode = RedisCluster = parse_url = None  # type: ignore[assignment,misc]

if TYPE_CHECKING:
    from redis import Redis

__all__ = ["cluster_client", "node_client", "stale", "tagged"]

# (alias, its settings) -> (pid, cluster client): one per process (a forked child
# builds its own) and per settings (an alias given other nodes gets a client of them).
_CLIENTS: dict[tuple[str, str], tuple[int, RedisCluster]] = {}
_LOCK = threading.Lock()

def tagged(prefix: str) -> str:
    """The store's prefix on a cluster: `prefix` as a hash tag, so that every key under
    it hashes to one slot."""
    return "{" + prefix + "}"


def cluster_client(alias: str) -> RedisCluster:
    """This process's RedisCluster for the cache `alias` (see the module docstring)."""
    pid = os.getpid()
    key = (alias, repr(getattr(django_settings, "CACHES", {}).get(alias)))
    entry = _CLIENTS.get(key)
    if entry is not None and entry[0] == pid:
        return entry[1]
    with _LOCK:
        entry = _CLIENTS.get(key)
        if entry is None or entry[0] != pid:
            entry = _CLIENTS[key] = (pid, _build(alias))
        return entry[1]


def _build(alias: str) -> RedisCluster:
    config = getattr(django_settings, "CACHES", {})[alias]
    options = config.get("OPTIONS") or {}
    kwargs: dict[str, Any] = {}
    nodes = []
    for location in locations(config):
        parts = parse_url(location)
        nodes.append(ClusterNode(parts.get("host") or "localhost", int(parts.get("port") or 6379)))
        for name in ("username", "password"):
            if parts.get(name):
                kwargs[name] = parts[name]
        if location.startswith("rediss:"):
            kwargs["ssl"] = True
    if options.get("PASSWORD"):
        kwargs["password"] = options["PASSWORD"]
    for option, name in (("SOCKET_TIMEOUT", "socket_timeout"),
                         ("SOCKET_CONNECT_TIMEOUT", "socket_connect_timeout")):
        if options.get(option) is not None:
            kwargs[name] = options[option]
    kwargs.update(options.get("CONNECTION_POOL_KWARGS") or {})
    return RedisCluster(startup_nodes=nodes, **kwargs)


def node_client(cluster: RedisCluster, key: str) -> Redis:
    """The client of the primary that serves `key`'s slot now (the cluster client's own
    client of that node, with its connection pool)."""
    return cluster.get_redis_connection(cluster.get_node_from_key(key))


def stale(error: BaseException) -> bool:
    """Whether `error` says that the node the store was sending to may no longer serve
    its slot: lost, moved, demoted to a replica, or the cluster down (or its slots not
    all served while it reads the topology again)."""
    return isinstance(error, redis_errors.ConnectionError | redis_errors.TimeoutError
                      | redis_errors.AskError | redis_errors.ClusterError
                      | redis_errors.TryAgainError | redis_errors.ReadOnlyError
                      | redis_errors.RedisClusterException)
