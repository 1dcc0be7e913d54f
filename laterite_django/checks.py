"""System checks for every LATERITE_QUEUE_* setting and for jobs the workers never run."""

from __future__ import annotations

import importlib.util
import re
from typing import Any

from django.conf import settings as django_settings
from django.core.checks import Error, Tags, Warning, register
from django.db import DatabaseError, connections
from django.utils.connection import ConnectionDoesNotExist

from .conf import DEFAULTS, message, problem, raw
from .management.at_rest import retired_keys
from .models import Job
from .registry import registry
from .schedules.definition import problems
from .stores import get_store
from .stores.database.pgbouncer import behind_pooler
from .stores.database.wait import LISTEN_HINT
from .stores.redis.alias import HINT, cluster_problems, shared_alias_problem

__all__ = ["CHECK_IDS", "check_encryption", "check_jobs", "check_jobs_left_in_the_database",
           "check_listen", "check_retired_keys", "check_schedules", "check_settings"]

# Every id the package's system checks report, with its level and what it means: the
# manual's list of checks is made from this (docs/_ext), and a test keeps it and the
# ids in the code the same. The settings' ids are conf's rules' Problem codes.
CHECK_IDS: dict[str, tuple[str, str]] = {
    "laterite.E001": ("Error", "LATERITE_QUEUE_MODE is not 'external', 'worker' or 'inline'."),
    "laterite.E002": ("Error", "LATERITE_QUEUE_STORE is not 'database' or 'redis'."),
    "laterite.E003": ("Error", "LATERITE_QUEUE_DATABASE names no database in DATABASES."),
    "laterite.E004": ("Error", "LATERITE_QUEUE_DATABASE's ENGINE is not PostgreSQL or SQLite."),
    "laterite.E005": ("Error", "LATERITE_QUEUE_PREFIX is not a non-empty string."),
    "laterite.E006": ("Error", "LATERITE_QUEUE_QUEUES is not a non-empty list of queue "
                               "names, or lists one twice."),
    "laterite.E007": ("Error", "LATERITE_QUEUE_RETRY_AFTER is not seconds > 0."),
    "laterite.E008": ("Error", "LATERITE_QUEUE_POLL is not seconds > 0."),
    "laterite.E009": ("Error", "LATERITE_QUEUE_WORKERS is not an integer >= 1."),
    "laterite.E010": ("Error", "LATERITE_QUEUE_REDIS names no cache in CACHES (Redis store)."),
    "laterite.E011": ("Error", "The store is Redis but django-redis is not installed."),
    "laterite.E012": ("Error", "The cache LATERITE_QUEUE_REDIS names is not a django-redis "
                               "cache on a single server."),
    "laterite.E013": ("Error", "The cache LATERITE_QUEUE_REDIS names cannot be used (its "
                               "LOCATION or OPTIONS)."),
    "laterite.E014": ("Error", "The queue's cache is not its own: the site's or the "
                               "sessions' cache, or on a Redis database another cache "
                               "uses, where a cache.clear() (FLUSHDB) deletes every job."),
    "laterite.E015": ("Error", "LATERITE_QUEUE_SHUTDOWN_GRACE is not seconds >= 0."),
    "laterite.E020": ("Error", "LATERITE_QUEUE_SCHEDULES is not a dict, or a schedule's "
                               "name or definition is malformed (unknown keys)."),
    "laterite.E021": ("Error", "A schedule names no job or task, or one that is not "
                               "registered (or has both)."),
    "laterite.E022": ("Error", "A schedule's rule: not exactly one of cron and every, a bad "
                               "cron rule, or every too short."),
    "laterite.E023": ("Error", "A schedule's timezone is not an IANA zone."),
    "laterite.E024": ("Error", "A schedule's args or kwargs: wrong shape, not JSON, or not "
                               "what its job or task takes."),
    "laterite.E025": ("Error", "A schedule's missed (or its limit) is not allowed."),
    "laterite.E026": ("Error", "A schedule's overlap is not a bool, or its queue not a "
                               "queue name."),
    "laterite.E027": ("Error", "A schedule name is defined twice (in the settings and by "
                               "@job(schedule=...))."),
    "laterite.E030": ("Error", "LATERITE_QUEUE_LIMITS is malformed."),
    "laterite.E050": ("Error", "LATERITE_QUEUE_FAIRNESS is malformed."),
    "laterite.E051": ("Error", "LATERITE_QUEUE_HISTORY is malformed: not None or "
                               "{'keep': duration, 'queues': {queue: duration or None}}."),
    "laterite.E040": ("Error", "LATERITE_QUEUE_LISTEN_DATABASE is not None or a PostgreSQL "
                               "database's alias."),
    "laterite.E041": ("Error", "LATERITE_QUEUE_REDIS_WAIT is not None or seconds > 0."),
    "laterite.E042": ("Error", "LATERITE_QUEUE_REDIS_EPHEMERAL is not True or False."),
    "laterite.E052": ("Error", "LATERITE_QUEUE_REDIS_CLUSTER is not True or False."),
    "laterite.E053": ("Error", "LATERITE_QUEUE_REDIS_CLUSTER is True but the queue's cache "
                               "alias or prefix needs a single Redis server (a database "
                               "number, a Sentinel, braces in the prefix)."),
    "laterite.E043": ("Error", "LATERITE_QUEUE_ENCRYPTION_KEYS is malformed: not a list of "
                               "{'id', 'key'}, or a key not 32 bytes after base64 decoding."),
    "laterite.E044": ("Error", "LATERITE_QUEUE_ENCRYPTION_KEYS lists a key id twice."),
    "laterite.E045": ("Error", "LATERITE_QUEUE_ENCRYPTION_HASH_KEY is not None or base64 of "
                               "32 bytes or more."),
    "laterite.E046": ("Error", "A job encrypts its arguments but "
                               "LATERITE_QUEUE_ENCRYPTION_KEYS lists no key."),
    "laterite.E047": ("Error", "A job encrypts its arguments but the cryptography package "
                               "is not installed."),
    "laterite.E048": ("Error", "A job computes a unique, concurrency or debounce key from "
                               "encrypted arguments but LATERITE_QUEUE_ENCRYPTION_HASH_KEY "
                               "is not set."),
    "laterite.W001": ("Warning", "A job's queue is not in LATERITE_QUEUE_QUEUES: a plain "
                                 "`queue_work` never runs it."),
    "laterite.W002": ("Warning", "A LATERITE_QUEUE_* setting that laterite does not know."),
    "laterite.W003": ("Warning", "Jobs are left in the database store while "
                                 "LATERITE_QUEUE_STORE is 'redis' (a database check)."),
    "laterite.W043": ("Warning", "Jobs, failed jobs, outbox rows, batch callbacks, history "
                                 "records or task results are encrypted under a key id "
                                 "LATERITE_QUEUE_ENCRYPTION_KEYS no longer lists (a "
                                 "database check, on a bounded sample)."),
    "laterite.W040": ("Warning", "Idle workers cannot LISTEN: their PostgreSQL connection "
                                 "goes through a pooler (a database check)."),
    "laterite.E101": ("Error", "A TASKS backend is LateriteBackend but laterite_django is "
                               "not in INSTALLED_APPS."),
    "laterite.E102": ("Error", "LateriteBackend's OPTIONS is not a dict, or names an option "
                               "it does not know."),
    "laterite.E103": ("Error", "A LateriteBackend OPTIONS value is not allowed."),
    "laterite.W101": ("Warning", "A LateriteBackend queue is not in LATERITE_QUEUE_QUEUES: "
                                 "a plain `queue_work` never runs its tasks."),
}


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
        errors.extend(_check_redis_cluster(raw("REDIS")))
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


def _check_redis_cluster(alias: Any) -> list:
    """Refuse a cluster alias whose settings need a single server (cluster.py)."""
    if raw("REDIS_CLUSTER") is not True or problem("REDIS", alias) is not None:
        return []
    found = cluster_problems(alias, raw("PREFIX"))
    if found is None:
        return []
    return [Error(found[0], hint=found[1], id="laterite.E053")]


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
def check_encryption(app_configs: Any = None, **kwargs: Any) -> list:
    """Report jobs that encrypt their arguments where nothing could: no key listed, no
    `cryptography` package, or keys made of them with no key to hash them under."""
    encrypted = [job for job in registry if job.encrypt]
    if not encrypted:
        return []
    names = ", ".join(repr(job.name) for job in encrypted[:5]) + (
        f" and {len(encrypted) - 5} more" if len(encrypted) > 5 else "")
    errors: list = []
    if not raw("ENCRYPTION_KEYS"):
        errors.append(Error(
            f"Jobs {names} encrypt their arguments, but LATERITE_QUEUE_ENCRYPTION_KEYS lists "
            f"no key: their pushes are refused.",
            hint="Set LATERITE_QUEUE_ENCRYPTION_KEYS = [{'id': '2026-12', 'key': base64 of "
            "32 random bytes}] (see the how-to guide Encrypted arguments).",
            id="laterite.E046"))
    if importlib.util.find_spec("cryptography") is None:
        errors.append(Error(
            f"Jobs {names} encrypt their arguments, but the cryptography package is not "
            f"installed.",
            hint="Install cryptography (the 'crypto' extra).", id="laterite.E047"))
    keyed = [job.name for job in encrypted if not getattr(job, "keys_given", False) and (
        job.unique_key is not None or job.concurrency_key is not None
        or job.debounce is not None)]
    if keyed and raw("ENCRYPTION_HASH_KEY") is None:
        errors.append(Error(
            f"Jobs {', '.join(map(repr, keyed))} compute a unique, concurrency or debounce "
            f"key from encrypted arguments, but LATERITE_QUEUE_ENCRYPTION_HASH_KEY is not "
            f"set: those keys are stored as its HMAC, never in plain.",
            hint="Set LATERITE_QUEUE_ENCRYPTION_HASH_KEY to base64 of 32 random bytes, and "
            "keep it: it does not rotate with the encryption keys.",
            id="laterite.E048"))
    return errors


@register()
def check_schedules(app_configs: Any = None, **kwargs: Any) -> list:
    """Report each bad schedule (LATERITE_QUEUE_SCHEDULES, @job(schedule=...)) by name:
    its rule, zone, job, arguments, `missed`, `overlap`, `queue` (laterite.E02x)."""
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


# The rows of each place the check of retired keys looks at (see at_rest.retired_keys):
# one index range of the oldest, where rows a rotation left behind sit.
RETIRED_KEYS_SAMPLE = 1000


@register(Tags.database)
def check_retired_keys(app_configs: Any = None, databases: Any = None, **kwargs: Any) -> list:
    """Warn when rows are sealed under a key id LATERITE_QUEUE_ENCRYPTION_KEYS no longer
    lists: no worker can run those jobs. Run `queue_rekey` before dropping a key.

    A database check (it queries): `manage.py check --database default` and `migrate`
    run it. It looks at the first RETIRED_KEYS_SAMPLE rows by id of each place (the
    store's waiting and delayed jobs, the failed list, the outbox, the batches'
    callbacks, the history, the task results): bounded, however large the tables, so a
    retired key only on newer rows may go unseen. A store that is down or not migrated
    says nothing here.
    """
    alias = raw("DATABASE")
    keys = raw("ENCRYPTION_KEYS")
    if (not databases or alias not in databases or raw("MODE") == "inline"
            or problem("ENCRYPTION_KEYS", keys) is not None):
        return []
    if not keys and not any(job.encrypt for job in registry):
        return []  # encryption not used here: nothing to look at
    try:
        found = retired_keys(get_store(), [entry["id"] for entry in keys or []],
                             RETIRED_KEYS_SAMPLE)
    except Exception:
        return []  # a store that is down or not migrated: the commands say so themselves
    if not found:
        return []
    where = "; ".join(f"{rows}{'+' if rows >= RETIRED_KEYS_SAMPLE else ''} {what} under "
                      f"{', '.join(map(repr, sorted(ids)))}"
                      for what, (ids, rows) in found.items())
    return [
        Warning(
            f"Rows are encrypted under key ids LATERITE_QUEUE_ENCRYPTION_KEYS no longer "
            f"lists ({where}; among the first {RETIRED_KEYS_SAMPLE} of each): no process "
            f"can decrypt them, so those jobs fail when claimed.",
            hint="List the retired key again (after the first one), run `manage.py "
            "queue_rekey` to move every row to the first key, then drop it.",
            id="laterite.W043",
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
