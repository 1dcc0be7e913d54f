"""System checks for every LATERITE_QUEUE_* setting and for jobs the workers never run."""

from __future__ import annotations

import re
from numbers import Real
from typing import Any

from django.conf import settings as django_settings
from django.core.checks import Error, Tags, Warning, register

from .conf import DEFAULTS, MODES, STORES, settings
from .registry import registry
from .stores.redis_alias import HINT, shared_alias_problem

__all__ = ["check_jobs", "check_settings"]


def _setting(name: str) -> str:
    return f"LATERITE_QUEUE_{name}"


def _is_number(value: Any) -> bool:
    return isinstance(value, Real) and not isinstance(value, bool)


@register(Tags.compatibility)
def check_settings(app_configs: Any = None, **kwargs: Any) -> list:
    """Report each malformed setting with what was given and what is allowed."""
    errors: list = []

    def error(code: int, name: str, given: Any, allowed: str, hint: str | None = None) -> None:
        errors.append(
            Error(
                f"{_setting(name)} is {given!r}; {allowed}.",
                hint=hint,
                id=f"laterite.E{code:03d}",
            )
        )

    mode = settings.MODE
    if mode not in MODES:
        error(1, "MODE", mode, f"allowed: {', '.join(map(repr, MODES))}")
    store = settings.STORE
    if store not in STORES:
        error(2, "STORE", store, f"allowed: {', '.join(map(repr, STORES))}")
    database = settings.DATABASE
    if not isinstance(database, str) or database not in django_settings.DATABASES:
        error(
            3,
            "DATABASE",
            database,
            f"it must name a database in DATABASES ({', '.join(django_settings.DATABASES)})",
        )
    elif django_settings.DATABASES[database].get("ENGINE", "").rsplit(".", 1)[-1] not in {
        "postgresql", "sqlite3", "postgis", "spatialite"
    }:
        error(
            4,
            "DATABASE",
            database,
            "its ENGINE must be PostgreSQL or SQLite",
            hint=f"Its ENGINE is {django_settings.DATABASES[database].get('ENGINE')!r}.",
        )
    prefix = settings.PREFIX
    if not isinstance(prefix, str) or not prefix:
        error(5, "PREFIX", prefix, "it must be a non-empty string")
    queues = settings.QUEUES
    if (
        not isinstance(queues, list | tuple)
        or not queues
        or not all(isinstance(q, str) and q for q in queues)
    ):
        error(6, "QUEUES", queues, "it must be a non-empty list of queue names (strings)")
    elif len(set(queues)) != len(queues):
        error(6, "QUEUES", queues, "it lists a queue twice")
    retry_after = settings.RETRY_AFTER
    if not _is_number(retry_after) or retry_after <= 0:
        error(7, "RETRY_AFTER", retry_after, "it must be seconds > 0")
    poll = settings.POLL
    if not _is_number(poll) or poll <= 0:
        error(8, "POLL", poll, "it must be seconds > 0")
    workers = settings.WORKERS
    if not isinstance(workers, int) or isinstance(workers, bool) or workers < 1:
        error(9, "WORKERS", workers, "it must be an integer >= 1")
    if store == "redis" and mode != "inline":
        errors.extend(_check_redis(settings.REDIS))
        errors.extend(_check_redis_alias_is_its_own(settings.REDIS))
    unknown = sorted(
        name
        for name in dir(django_settings)
        if name.startswith("LATERITE_QUEUE_")
        and name.removeprefix("LATERITE_QUEUE_") not in DEFAULTS
    )
    for name in unknown:
        errors.append(
            Warning(
                f"{name} is not a laterite setting.",
                hint=f"Known settings: {', '.join(_setting(n) for n in DEFAULTS)}.",
                id="laterite.W002",
            )
        )
    return errors


def _check_redis(alias: Any) -> list:
    """Check that LATERITE_QUEUE_REDIS names a usable django-redis cache (one server)."""
    caches = getattr(django_settings, "CACHES", {})
    if not isinstance(alias, str) or alias not in caches:
        return [
            Error(
                f"LATERITE_QUEUE_REDIS is {alias!r}; it must name a cache in CACHES "
                f"({', '.join(map(repr, caches)) or 'none configured'}).",
                hint="Configure a django-redis cache (BACKEND 'django_redis.cache.RedisCache') "
                "and set LATERITE_QUEUE_REDIS to its alias.",
                id="laterite.E010",
            )
        ]
    try:
        from django_redis import get_redis_connection
    except ImportError:
        return [
            Error(
                "LATERITE_QUEUE_STORE is 'redis' but django-redis is not installed.",
                hint="pip install 'laterite-django[redis]' (or django-redis).",
                id="laterite.E011",
            )
        ]
    config = caches[alias]
    try:
        get_redis_connection(alias, write=True)
    except NotImplementedError:
        client = config.get("OPTIONS", {}).get("CLIENT_CLASS")
        given = f"BACKEND {config.get('BACKEND')!r}" + (
            f", CLIENT_CLASS {client!r}" if client else ""
        )
        return [
            Error(
                f"The cache {alias!r} named by LATERITE_QUEUE_REDIS is not a django-redis "
                f"cache on a single server (its {given}).",
                hint="Use BACKEND 'django_redis.cache.RedisCache' with the default client "
                "(not the sharded one) for this alias.",
                id="laterite.E012",
            )
        ]
    except Exception as e:
        return [
            Error(
                f"The cache {alias!r} named by LATERITE_QUEUE_REDIS (LOCATION "
                f"{_masked(config.get('LOCATION'))!r}) cannot be used: {e}",
                hint="Check that cache's LOCATION and OPTIONS.",
                id="laterite.E013",
            )
        ]
    return []


def _check_redis_alias_is_its_own(alias: Any) -> list:
    """Refuse a queue cache that clear() on another cache would wipe (FLUSHDB)."""
    problem = shared_alias_problem(alias)
    if problem is None:
        return []
    return [Error(problem, hint=HINT, id="laterite.E014")]


def _masked(location: Any) -> Any:
    """Hide the password of a Redis URL (redis://user:secret@host) in messages."""
    if isinstance(location, list | tuple):
        return [_masked(item) for item in location]
    if isinstance(location, str):
        return re.sub(r"://([^:@/]*):[^@/]*@", r"://\1:***@", location)
    return location


@register()
def check_jobs(app_configs: Any = None, **kwargs: Any) -> list:
    """Warn about jobs on a queue that a plain `queue_work` would never take from."""
    queues = settings.QUEUES
    if not isinstance(queues, list | tuple):
        return []
    return [
        Warning(
            f"Job {job.name!r} is on queue {job.queue!r}, which LATERITE_QUEUE_QUEUES "
            f"({list(queues)!r}) does not list: a plain `queue_work` never runs it.",
            hint=f"Add {job.queue!r} to LATERITE_QUEUE_QUEUES, or run "
            f"`queue_work --queue {job.queue}`.",
            id="laterite.W001",
        )
        for job in registry
        if job.queue not in queues
    ]
