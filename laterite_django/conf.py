"""Every LATERITE_QUEUE_* setting: its default, its rule, and its value, checked on access.

Reading on access (not at import) lets `override_settings` reach them in tests.
Checking on access too means a wrong value stops whatever reads it even where
no system check ran (`queue_work --skip-checks`, `worker` mode under a WSGI
server). The system checks (checks.py) report the same rules, from `problem()`.
A value that passed its check is kept until Django says a setting changed
(`setting_changed`, sent by `override_settings`): a push reads several, and
checking them each time cost more than a tenth of its own work.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from numbers import Real
from typing import Any, NamedTuple

from django.conf import settings as django_settings
from django.core.signals import setting_changed

from .core.cipher import hash_key_problem, keys_problem
from .core.fairness import fairness_problem
from .core.history import history_problem
from .core.limits import limits_problem
from .exceptions import LateriteConfigurationError

__all__ = [
    "DEFAULTS", "DESCRIPTIONS", "MODES", "STORES", "Problem", "message", "problem", "raw",
    "settings", "validate_all",
]

MODES = ("external", "worker", "inline")
STORES = ("database", "redis")
DATABASE_ENGINES = {"postgresql", "sqlite3", "postgis", "spatialite"}

DEFAULTS: dict[str, Any] = {
    "MODE": "external",
    "STORE": "database",
    "DATABASE": "default",
    "REDIS": "default",
    "PREFIX": "laterite",
    "QUEUES": ["default"],
    "RETRY_AFTER": 90,
    "POLL": 1,
    "WORKERS": 2,
    "SHUTDOWN_GRACE": 5,
    "SCHEDULES": {},
    "LIMITS": {},
    "FAIRNESS": {},
    "LISTEN_DATABASE": None,
    "REDIS_WAIT": None,
    "REDIS_EPHEMERAL": False,
    "REDIS_CLUSTER": False,
    "ENCRYPTION_KEYS": [],
    "ENCRYPTION_HASH_KEY": None,
    "HISTORY": None,
}

# What each setting is and the values it takes, one entry per DEFAULTS key: the manual's
# settings reference is made from these (docs/_ext), and a test keeps the two aligned.
DESCRIPTIONS: dict[str, str] = {
    "MODE": "Where pushed jobs run: 'external' (stored; `queue_work` runs them), 'worker' "
            "(stored; worker threads in the web process run them) or 'inline' (run at the "
            "push, nothing stored; a failure raises).",
    "STORE": "Where jobs are kept: 'database' (PostgreSQL or SQLite, through the Django "
             "ORM's connection) or 'redis'.",
    "DATABASE": "The alias in DATABASES of the database store's database; its ENGINE must "
                "be PostgreSQL or SQLite.",
    "REDIS": "The alias in CACHES of the Redis store's django-redis cache (one server, or "
             "a Redis Cluster's nodes with LATERITE_QUEUE_REDIS_CLUSTER), the queue's own: "
             "not a cache that another cache's clear() would wipe.",
    "PREFIX": "The prefix of every Redis key of the queue (a non-empty string).",
    "QUEUES": "The queues a worker takes from, in priority order (a non-empty list of "
              "distinct names).",
    "RETRY_AFTER": "Seconds (> 0) after which a running job whose worker stopped sending "
                   "heartbeats counts as abandoned, and runs again.",
    "POLL": "Seconds (> 0) an idle worker waits before looking for jobs again, when no "
            "push wakes it.",
    "WORKERS": "Worker processes (`queue_work` without --processes) or threads (the "
               "'worker' mode): an integer >= 1.",
    "SHUTDOWN_GRACE": "Seconds (>= 0) the 'worker' mode's threads get to finish their jobs "
                      "when the process ends; then the jobs go back to their queues, not "
                      "counted as tries.",
    "SCHEDULES": "Recurring schedules, by name: each a dict with a job (or a task), cron "
                 "or every, and optionally timezone, args, kwargs, missed, overlap and "
                 "queue.",
    "LIMITS": "Flow control per queue: {queue: {'concurrency': N, 'rate': 'N/s|m|h'}}, "
              "either or both.",
    "FAIRNESS": "Fair claims per queue: {queue: {key: weight, 'default_weight': weight}} "
                "(weights from 0.01 to 10, 1 by default); a queue named here serves "
                "its waiting fair keys in turn.",
    "LISTEN_DATABASE": "None, or the alias of a direct connection to the same PostgreSQL "
                       "that idle workers LISTEN on, when LATERITE_QUEUE_DATABASE goes "
                       "through a pooler such as PgBouncer.",
    "REDIS_WAIT": "None (a push returns once the Redis primary has it), or seconds (> 0) a "
                  "push waits for one replica to have it (WAIT 1), raising "
                  "PushNotReplicated if none confirms in time.",
    "REDIS_EPHEMERAL": "True if the queue's Redis is meant to keep nothing across a "
                       "restart, so `queue_work` does not warn that it has no persistence.",
    "REDIS_CLUSTER": "True if the queue's cache alias points at a Redis Cluster: the store "
                     "then builds redis-py's RedisCluster from the alias's LOCATION (its "
                     "nodes) and keeps every key under the hash tag {LATERITE_QUEUE_PREFIX}, "
                     "on one shard.",
    "ENCRYPTION_KEYS": "The keys of encrypted job arguments (@job(encrypt=...)), newest first: "
                       "a list of {'id': str, 'key': base64 of 32 bytes}; the first encrypts, "
                       "every one decrypts. Needs the `crypto` extra.",
    "ENCRYPTION_HASH_KEY": "None, or base64 of 32 bytes or more: the HMAC key that unique, "
                           "concurrency and debounce keys computed from encrypted arguments "
                           "are stored under (as hashes). It does not rotate with the "
                           "encryption keys; changing it changes those keys' meaning.",
    "HISTORY": "Job history: None (off), or {'keep': duration, 'queues': {queue: duration "
               "or None}}: each finished job of a queue kept leaves a JobRecord for that "
               "long (a duration: seconds > 0 or '90s', '30m', '12h', '7d').",
}


class Problem(NamedTuple):
    """What is wrong with a setting's value: its check id, what is allowed, a hint."""

    code: int
    allowed: str
    hint: str | None = None


def _is_seconds(value: Any) -> bool:
    return isinstance(value, Real) and not isinstance(value, bool) and float(value) > 0


def _mode(value: Any) -> Problem | None:
    if value not in MODES:
        return Problem(1, f"allowed: {', '.join(map(repr, MODES))}")
    return None


def _store(value: Any) -> Problem | None:
    if value not in STORES:
        return Problem(2, f"allowed: {', '.join(map(repr, STORES))}")
    return None


def _database(value: Any) -> Problem | None:
    databases = django_settings.DATABASES
    if not isinstance(value, str) or value not in databases:
        return Problem(3, f"it must name a database in DATABASES ({', '.join(databases)})")
    engine = databases[value].get("ENGINE", "")
    if engine.rsplit(".", 1)[-1] not in DATABASE_ENGINES:
        return Problem(4, "its ENGINE must be PostgreSQL or SQLite",
                       hint=f"Its ENGINE is {engine!r}.")
    return None


def _redis(value: Any) -> Problem | None:
    caches = getattr(django_settings, "CACHES", {})
    if not isinstance(value, str) or value not in caches:
        return Problem(
            10,
            f"it must name a cache in CACHES ({', '.join(map(repr, caches)) or 'none configured'})",
            hint="Configure a django-redis cache (BACKEND 'django_redis.cache.RedisCache') "
            "and set LATERITE_QUEUE_REDIS to its alias.",
        )
    return None


def _prefix(value: Any) -> Problem | None:
    if not isinstance(value, str) or not value:
        return Problem(5, "it must be a non-empty string")
    return None


def _queues(value: Any) -> Problem | None:
    if (
        not isinstance(value, list | tuple)
        or not value
        or not all(isinstance(q, str) and q for q in value)
    ):
        return Problem(6, "it must be a non-empty list of queue names (strings)")
    if len(set(value)) != len(value):
        return Problem(6, "it lists a queue twice")
    return None


def _retry_after(value: Any) -> Problem | None:
    return None if _is_seconds(value) else Problem(7, "it must be seconds > 0")


def _poll(value: Any) -> Problem | None:
    return None if _is_seconds(value) else Problem(8, "it must be seconds > 0")


def _workers(value: Any) -> Problem | None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        return Problem(9, "it must be an integer >= 1")
    return None


def _shutdown_grace(value: Any) -> Problem | None:
    number = isinstance(value, int | float) and not isinstance(value, bool)
    if not number or not math.isfinite(value) or value < 0:
        return Problem(15, "it must be seconds >= 0")
    return None


def _schedules(value: Any) -> Problem | None:
    """Its shape only; each schedule is checked by schedules.definition (laterite.E02x)."""
    if not isinstance(value, dict):
        return Problem(20, "it must be a dict of schedule names to definitions")
    return None


def _limits(value: Any) -> Problem | None:
    found = limits_problem(value)
    return None if found is None else Problem(30, found)


def _fairness(value: Any) -> Problem | None:
    found = fairness_problem(value)
    return None if found is None else Problem(50, found)


def _listen_database(value: Any) -> Problem | None:
    """None (LISTEN on LATERITE_QUEUE_DATABASE's own connection), or a PostgreSQL alias."""
    if value is None:
        return None
    databases = django_settings.DATABASES
    if not isinstance(value, str) or value not in databases:
        return Problem(
            40, f"it must be None or name a database in DATABASES ({', '.join(databases)})")
    engine = str(databases[value].get("ENGINE", ""))
    if engine.rsplit(".", 1)[-1] not in ("postgresql", "postgis"):
        return Problem(40, "it must name a PostgreSQL database (idle workers LISTEN there)",
                       hint=f"Its ENGINE is {engine!r}.")
    return None


def _redis_wait(value: Any) -> Problem | None:
    """None (a push returns once the primary has it), or seconds to wait for a replica."""
    if value is None:
        return None
    number = isinstance(value, int | float) and not isinstance(value, bool)
    if not number or not math.isfinite(value) or value <= 0:
        return Problem(41, "it must be None or seconds > 0 (how long a push waits for "
                       "one replica to have it)")
    return None


def _redis_ephemeral(value: Any) -> Problem | None:
    """Whether the queue's Redis is meant to keep nothing across a restart (no warning)."""
    if not isinstance(value, bool):
        return Problem(42, "it must be True or False (True: a Redis that keeps nothing on "
                       "disk is meant, and queue_work does not warn of it)")
    return None


def _redis_cluster(value: Any) -> Problem | None:
    """Whether the queue's cache alias points at a Redis Cluster."""
    if not isinstance(value, bool):
        return Problem(52, "it must be True or False (True: the queue's cache alias points "
                       "at a Redis Cluster)")
    return None


def _encryption_keys(value: Any) -> Problem | None:
    """The keys of encrypted arguments: each an id and 32 bytes, no id twice."""
    found = keys_problem(value)
    if found is None:
        return None
    what, duplicate = found
    if duplicate:
        return Problem(44, what)
    return Problem(43, what,
                   hint="Make a key with: python -c \"import base64, os; "
                   "print(base64.b64encode(os.urandom(32)).decode())\"")


def _encryption_hash_key(value: Any) -> Problem | None:
    """The HMAC key of keys computed from encrypted arguments, or None."""
    what = hash_key_problem(value)
    return None if what is None else Problem(45, what)


def _history(value: Any) -> Problem | None:
    found = history_problem(value)
    return None if found is None else Problem(51, found)


# Settings whose value is a secret: never quoted in a message.
SECRETS = frozenset({"ENCRYPTION_KEYS", "ENCRYPTION_HASH_KEY"})


RULES: dict[str, Callable[[Any], Problem | None]] = {
    "MODE": _mode,
    "STORE": _store,
    "DATABASE": _database,
    "REDIS": _redis,
    "PREFIX": _prefix,
    "QUEUES": _queues,
    "RETRY_AFTER": _retry_after,
    "POLL": _poll,
    "WORKERS": _workers,
    "SHUTDOWN_GRACE": _shutdown_grace,
    "SCHEDULES": _schedules,
    "LIMITS": _limits,
    "FAIRNESS": _fairness,
    "LISTEN_DATABASE": _listen_database,
    "REDIS_WAIT": _redis_wait,
    "REDIS_EPHEMERAL": _redis_ephemeral,
    "REDIS_CLUSTER": _redis_cluster,
    "ENCRYPTION_KEYS": _encryption_keys,
    "ENCRYPTION_HASH_KEY": _encryption_hash_key,
    "HISTORY": _history,
}


def raw(name: str) -> Any:
    """Return LATERITE_QUEUE_<name> as configured (or its default), unchecked."""
    return getattr(django_settings, f"LATERITE_QUEUE_{name}", DEFAULTS[name])


def problem(name: str, value: Any) -> Problem | None:
    """Say what is wrong with `value` for LATERITE_QUEUE_<name>, or return None."""
    return RULES[name](value)


def message(name: str, value: Any, found: Problem) -> str:
    """The error text for a bad value: the setting, the value given and what is allowed
    (a secret's value is not shown)."""
    if name in SECRETS:
        return f"LATERITE_QUEUE_{name} is not allowed: {found.allowed}."
    return f"LATERITE_QUEUE_{name} is {value!r}; {found.allowed}."


class Settings:
    """Attribute access to LATERITE_QUEUE_<NAME>, falling back to DEFAULTS.

    A value its rule refuses raises LateriteConfigurationError saying why (at
    every access); a value it accepts is kept until `forget()`. It is kept as an
    instance attribute, so that every later read is a plain attribute lookup
    (a push reads several): `__getattr__` runs only for a value not kept yet.
    """

    def __getattr__(self, name: str) -> Any:
        if name not in DEFAULTS:
            raise AttributeError(name)
        checked = self.__dict__
        value = raw(name)
        found = RULES[name](value)
        if found is not None:
            raise LateriteConfigurationError(message(name, value, found))
        # Into the dict read above: if forget() ran meanwhile (another thread), the
        # value may be the old one, and it lands in a dict no longer read.
        checked[name] = value
        return value

    def forget(self) -> None:
        """Drop the values checked so far: the next access reads and checks again."""
        self.__dict__ = {}


settings = Settings()

# What the rules read besides the LATERITE_QUEUE_* settings themselves.
_RULES_READ = frozenset({"DATABASES", "CACHES"})


def _on_setting_changed(setting: str, **kwargs: Any) -> None:
    if setting.startswith("LATERITE_QUEUE_") or setting in _RULES_READ:
        settings.forget()


setting_changed.connect(_on_setting_changed, dispatch_uid="laterite_conf_forget")


def validate_all() -> None:
    """Raise LateriteConfigurationError for the first bad setting a worker needs.

    LATERITE_QUEUE_REDIS is checked only when the store is Redis, as the store
    reads it only then.
    """
    for name in DEFAULTS:
        if name != "REDIS" or settings.STORE == "redis":
            getattr(settings, name)
