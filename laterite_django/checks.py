"""System checks for every LATERITE_QUEUE_* setting and for jobs the workers never run."""

from __future__ import annotations

import re
from typing import Any

from django.conf import settings as django_settings
from django.core.checks import Error, Tags, Warning, register
from django.db import DatabaseError, connections
from django.utils.connection import ConnectionDoesNotExist

from .conf import DEFAULTS, message, problem, raw
from .registry import registry
from .stores.redis_alias import HINT, shared_alias_problem

__all__ = ["check_jobs", "check_jobs_left_in_the_database", "check_listen", "check_schedules",
           "check_settings"]


def _setting(name: str) -> str:
    return f"LATERITE_QUEUE_{name}"


@register(Tags.compatibility)
def check_settings(app_configs: Any = None, **kwargs: Any) -> list:
    """Report each malformed setting with what was given and what is allowed.

    The rules are conf's: reading a bad setting at run time raises the same message.
    """
    errors: list = []
    for name in DEFAULTS:
        if name in ("REDIS", "SCHEDULES"):
            continue  # REDIS below with the rest of its configuration; SCHEDULES in
            # check_schedules
        value = raw(name)
        found = problem(name, value)
        if found is not None:
            code = f"laterite.E{found.code:03d}"
            errors.append(Error(message(name, value, found), hint=found.hint, id=code))
    store, mode = raw("STORE"), raw("MODE")
    if store == "redis" and mode != "inline":
        errors.extend(_check_redis(raw("REDIS")))
        errors.extend(_check_redis_alias_is_its_own(raw("REDIS")))
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
    found = problem("REDIS", alias)
    if found is not None:
        return [
            Error(message("REDIS", alias, found), hint=found.hint, id=f"laterite.E{found.code:03d}")
        ]
    try:
        from django_redis import get_redis_connection
    except ImportError:
        return [
            Error(
                "LATERITE_QUEUE_STORE is 'redis' but django-redis is not installed.",
                hint="Install django-redis and hiredis (the 'redis' extra).",
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
    queues = raw("QUEUES")
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


@register()
def check_schedules(app_configs: Any = None, **kwargs: Any) -> list:
    """Report each bad schedule (LATERITE_QUEUE_SCHEDULES, @job(schedule=...)) by name:
    its rule, zone, job, arguments, `missed`, `overlap`, `queue` (laterite.E02x)."""
    from .schedules.definition import problems

    return [Error(found.message, hint=found.hint, id=f"laterite.E{found.code:03d}")
            for found in problems()]


@register(Tags.database)
def check_jobs_left_in_the_database(app_configs: Any = None, databases: Any = None,
                                    **kwargs: Any) -> list:
    """Warn when jobs are left in the database store while LATERITE_QUEUE_STORE is
    'redis': no Redis worker takes them, so they would wait for ever unseen.

    A database check (it queries): `manage.py check --database default` and `migrate`
    run it. A database that is down or not migrated says nothing here: the commands
    say that themselves.
    """
    alias = raw("DATABASE")
    if not databases or raw("STORE") != "redis" or alias not in databases:
        return []
    from .models import Job

    try:
        left = Job.objects.using(alias).count()
    except (DatabaseError, ConnectionDoesNotExist):
        return []
    if not left:
        return []
    return [
        Warning(
            f"{left} {'job waits' if left == 1 else 'jobs wait'} in the database store "
            f"(database {alias!r}, table {Job._meta.db_table}), but LATERITE_QUEUE_STORE "
            f"is 'redis': no worker of the Redis store runs them.",
            hint="Run them out with the database store before switching: with "
            "LATERITE_QUEUE_STORE = 'database', `manage.py queue_work --stop-when-empty "
            "--wait-delayed SECONDS` runs those due and those due within SECONDS; or delete "
            "them with `manage.py queue_clear` under that same setting. The admin's Jobs "
            "list shows them.",
            id="laterite.W003",
        )
    ]


@register(Tags.database)
def check_listen(app_configs: Any = None, databases: Any = None, **kwargs: Any) -> list:
    """Warn when idle workers cannot LISTEN: their connection goes through a pooler.

    A database check (it connects): `manage.py check --database default` and
    `migrate` run it. Idle workers then poll every LATERITE_QUEUE_POLL seconds
    (and say so in their log) instead of being woken by each push.
    """
    if not databases or raw("STORE") != "database" or raw("MODE") == "inline":
        return []
    named = raw("LISTEN_DATABASE")
    alias = named or raw("DATABASE")
    if problem("DATABASE", raw("DATABASE")) is not None or problem("LISTEN_DATABASE", named):
        return []  # reported by check_settings
    if connections[alias].vendor != "postgresql":
        return []
    from .stores.database_wait import LISTEN_HINT
    from .stores.pooler import behind_pooler

    try:
        import psycopg

        params = connections[alias].get_connection_params()
        for unused in ("cursor_factory", "context", "prepare_threshold", "pool"):
            params.pop(unused, None)
        with psycopg.connect(**params, autocommit=True) as listener:
            pooled = behind_pooler(listener)
    except Exception:
        return []  # a database that is down is said by the commands, in one line
    if not pooled:
        return []
    setting = (f"LATERITE_QUEUE_LISTEN_DATABASE ({named!r})" if named
               else f"LATERITE_QUEUE_DATABASE ({alias!r})")
    return [
        Warning(
            f"The database {setting} reaches PostgreSQL through a pooler, where LISTEN "
            f"hears nothing: idle workers will look for jobs every LATERITE_QUEUE_POLL "
            f"seconds instead of being woken by a push.",
            hint=LISTEN_HINT,
            id="laterite.W040",
        )
    ]
