"""Whether a cache alias may hold the Redis queue: it must be the queue's own.

`cache.clear()` on a django-redis cache is FLUSHDB, which deletes every key of its
Redis database, the queue's included. The site cache ('default') and the sessions'
cache get cleared by habit or by tools, and a cache sharing the queue's Redis
database clears it as well; the system check (laterite.E014) and the store both
refuse such an alias. On a Redis Cluster (LATERITE_QUEUE_REDIS_CLUSTER), an alias whose
settings need a single server is refused too (laterite.E053: `cluster_problems`).
"""

from __future__ import annotations

from typing import Any

from django.conf import settings

__all__ = ["CLUSTER_HINT", "HINT", "cluster_problems", "locations", "redis_database",
           "shared_alias_problem", "single_node_options"]

HINT = (
    "Give the queue its own cache alias on its own Redis database number (for example "
    "LOCATION 'redis://127.0.0.1:6379/1' while your other caches use /0), set "
    "LATERITE_QUEUE_REDIS to that alias, and never call clear() on it."
)
_LOOPBACK = {"localhost", "127.0.0.1", "::1", "[::1]"}
CLUSTER_HINT = (
    "For a Redis Cluster, give the queue's cache alias the URLs of one or more of its "
    "nodes as LOCATION (redis://host:port, database 0), no Sentinel or sharding OPTIONS, "
    "and a LATERITE_QUEUE_PREFIX without '{' or '}' (the store makes it the hash tag of "
    "every key); or set LATERITE_QUEUE_REDIS_CLUSTER = False for a single server."
)

# The django-redis OPTIONS of a cache alias that need a single node: the cluster
# client has no use for them, and they say that something else than a cluster was meant.
_SINGLE_NODE_OPTIONS = {
    "CLIENT_CLASS": ("django_redis.client.SentinelClient", "django_redis.client.ShardClient",
                     "django_redis.client.HerdClient"),
    "CONNECTION_FACTORY": ("django_redis.pool.SentinelConnectionFactory",),
    "SENTINELS": None,
}


def _url_parts(location: str) -> dict[str, Any] | None:
    """redis-py's reading of a Redis URL (host, port, db, path...), None if it is not one."""
    try:
        from redis.connection import parse_url

        return dict(parse_url(location.strip()))
    except Exception:
        return None


def redis_database(config: Any) -> str | None:
    """Return "host:port/db" (or "unix:path/db") of a Redis cache's primary server,
    None for a cache that is not on Redis or whose LOCATION cannot be read."""
    if not isinstance(config, dict) or "redis" not in str(config.get("BACKEND", "")).lower():
        return None
    location = config.get("LOCATION")
    if isinstance(location, list | tuple):
        location = location[0] if location else None
    if not isinstance(location, str) or not location.strip():
        return None
    parts = _url_parts(location.split(",")[0])
    if parts is None:
        return None
    db = int(parts.get("db") or 0)
    if parts.get("path"):
        return f"unix:{parts['path']}/{db}"
    host = parts.get("host") or "localhost"
    host = "127.0.0.1" if host in _LOOPBACK else host
    return f"{host}:{parts.get('port') or 6379}/{db}"


def shared_alias_problem(alias: Any) -> str | None:
    """Say why the cache `alias` may not hold the queue (the message of laterite.E014),
    or return None if it is the queue's own."""
    caches = getattr(settings, "CACHES", {})
    if not isinstance(alias, str) or alias not in caches:
        return None  # reported elsewhere (laterite.E010)
    if alias == "default":
        reason = "the site cache ('default')"
    elif alias == getattr(settings, "SESSION_CACHE_ALIAS", "default"):
        reason = "the sessions' cache (SESSION_CACHE_ALIAS)"
    else:
        database = redis_database(caches[alias])
        others = [
            name for name, config in caches.items()
            if name != alias and database is not None and redis_database(config) == database
        ]
        if not others:
            return None
        many = len(others) > 1
        reason = (
            f"a cache on the Redis database {database} that the cache{'s' if many else ''} "
            f"{', '.join(map(repr, others))} also use{'' if many else 's'}"
        )
    return (
        f"LATERITE_QUEUE_REDIS is {alias!r}, {reason}, and a cache.clear() there (FLUSHDB) "
        f"would delete every queued job."
    )


def locations(config: dict[str, Any]) -> list[str]:
    """The URLs of a cache's LOCATION (one, comma-separated, or a list)."""
    location = config.get("LOCATION")
    if isinstance(location, str):
        return [part.strip() for part in location.split(",") if part.strip()]
    if isinstance(location, list | tuple):
        return [str(part).strip() for part in location if str(part).strip()]
    return []


def single_node_options(alias: str) -> list[str]:
    """What in the cache `alias`'s settings needs a single Redis server rather than a
    cluster: each as a sentence that says what to change (empty: none)."""
    config = getattr(settings, "CACHES", {}).get(alias, {})
    found = []
    urls = locations(config)
    if not urls:
        found.append(f"its LOCATION is {config.get('LOCATION')!r}: give one or more node "
                     f"URLs of the cluster (redis://host:port).")
    for location in urls:
        parts = _url_parts(location)
        if parts is None:
            found.append(f"its LOCATION {location!r} is not a Redis URL: give redis://host:port.")
            continue
        db = int(parts.get("db") or 0)
        if parts.get("path"):
            found.append(f"its LOCATION {location!r} is a socket: a cluster's nodes are "
                         f"reached by host and port.")
        elif db != 0:
            found.append(f"its LOCATION {location!r} names database {db}: a Redis Cluster "
                         f"has database 0 only; drop the /{db}.")
    options = config.get("OPTIONS") or {}
    for name, values in _SINGLE_NODE_OPTIONS.items():
        value = options.get(name)
        if value is not None and (values is None or value in values):
            found.append(f"its OPTIONS {name} is {value!r}, which needs a single server or a "
                         f"Sentinel: remove it (the store builds a redis-py RedisCluster).")
    return found


def cluster_problems(alias: str, prefix: Any) -> tuple[str, str] | None:
    """Why the cache `alias` and the key `prefix` cannot hold the queue on a Redis Cluster
    (the message of laterite.E053, and its hint), or None if they can."""
    found = single_node_options(alias)
    if isinstance(prefix, str) and ("{" in prefix or "}" in prefix):
        found.append(f"LATERITE_QUEUE_PREFIX {prefix!r} holds a brace: the store makes "
                     f"{{prefix}} the hash tag that keeps every key of the queue in one slot, "
                     f"and a brace inside would end the tag early or hash the keys apart.")
    if not found:
        return None
    return (f"LATERITE_QUEUE_REDIS_CLUSTER is True, but the cache {alias!r} named by "
            f"LATERITE_QUEUE_REDIS is not one for a cluster: " + " ".join(found), CLUSTER_HINT)
