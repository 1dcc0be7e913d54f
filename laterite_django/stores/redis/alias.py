"""Whether a cache alias may hold the Redis queue: it must be the queue's own.

`cache.clear()` on a django-redis cache is FLUSHDB, which deletes every key of its
Redis database, the queue's included. The site cache ('default') and the sessions'
cache get cleared by habit or by tools, and a cache sharing the queue's Redis
database clears it as well; the system check (laterite.E014) and the store both
refuse such an alias.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings

__all__ = ["HINT", "redis_database", "shared_alias_problem"]

HINT = (
    "Give the queue its own cache alias on its own Redis database number (for example "
    "LOCATION 'redis://127.0.0.1:6379/1' while your other caches use /0), set "
    "LATERITE_QUEUE_REDIS to that alias, and never call clear() on it."
)
_LOOPBACK = {"localhost", "127.0.0.1", "::1", "[::1]"}


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
    try:
        from redis.connection import parse_url

        parts = parse_url(location.split(",")[0].strip())
    except Exception:
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
