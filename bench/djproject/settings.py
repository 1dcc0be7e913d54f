"""One small Django project for every Django-based system in the bench.

$BENCH_SYSTEM picks the apps and the store: django_q2[_tuned],
django_tasks_db[_tuned], laterite_pg[_metrics|_in_batch|_encrypted|_history],
laterite_redis[_metrics|_in_batch|_encrypted|_history] or
laterite_sqlite (also
`laterite_pg@<commit>` and so on: the same settings for an earlier commit of
laterite, which must accept them too). Settings are as shipped (CONN_MAX_AGE=0,
each library's defaults) unless the comment says why not.
"""

import os
import re
from pathlib import Path

SYSTEM = os.environ.get("BENCH_SYSTEM", "laterite_sqlite")
# laterite_pg@2d1d5a0, laterite_pg_metrics, _in_batch, _encrypted and _history are set up
# as laterite_pg.
BASE = re.sub(r"_(metrics|in_batch|encrypted|history)$", "", SYSTEM.partition("@")[0])
SLUG = re.sub(r"[^A-Za-z0-9_]", "_", SYSTEM.replace("@", "_at_"))  # as bench.systems.slug
SLUG += os.environ.get("BENCH_DB_SUFFIX", "")  # as bench.systems.base.DB_SUFFIX
RUN_DIR = Path(os.environ.get("BENCH_RUN_DIR", Path(__file__).resolve().parents[1] / ".runs"))

SECRET_KEY = "bench-not-secret"
DEBUG = False  # DEBUG=True keeps every query in memory
USE_TZ = True
ALLOWED_HOSTS = []
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
INSTALLED_APPS = ["django.contrib.contenttypes", "django.contrib.auth"]
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": "WARNING"},
}

_pg = {
    "ENGINE": "django.db.backends.postgresql",
    "NAME": os.environ.get("BENCH_PG_DB", f"bench_{SLUG}"),
    "USER": os.environ.get("BENCH_PG_USER", "postgres"),
    "HOST": os.environ.get("BENCH_PG_HOST", "127.0.0.1"),
    "PORT": os.environ.get("BENCH_PG_PORT", "5432"),
}
_sqlite = {
    "ENGINE": "django.db.backends.sqlite3",
    "NAME": str(RUN_DIR / f"{SLUG}.sqlite3"),
    # What laterite's docs ask of a project with several worker processes.
    "OPTIONS": {
        "transaction_mode": "IMMEDIATE",
        "timeout": 20,
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
    },
}
DATABASES = {"default": _sqlite if BASE == "laterite_sqlite" else _pg}
if SYSTEM.endswith("_tuned"):
    # The peers' "tuned" rows: persistent connections instead of Django's
    # default CONN_MAX_AGE=0, which reconnects on every close_old_connections().
    _pg["CONN_MAX_AGE"] = None

if SYSTEM.startswith("django_q2"):
    INSTALLED_APPS += ["django_q"]
    Q_CLUSTER = {
        "name": "bench",
        "orm": "default",
        "workers": int(os.environ.get("BENCH_WORKERS", "1")),
        "timeout": 60,
        "retry": 120,
        "catch_up": False,
        "log_level": "WARNING",
    }

elif SYSTEM.startswith("django_tasks_db"):
    INSTALLED_APPS += ["django_tasks", "django_tasks_db"]
    TASKS = {"default": {"BACKEND": "django_tasks_db.DatabaseBackend"}}

elif SYSTEM.startswith("laterite"):
    INSTALLED_APPS += ["laterite_django", "bench.laterite_app"]
    if BASE == "laterite_redis":
        LATERITE_QUEUE_STORE = "redis"
        LATERITE_QUEUE_REDIS = "queue"  # its own alias: clear() on "default" is not for it
        CACHES = {
            "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"},
            "queue": {
                "BACKEND": "django_redis.cache.RedisCache",
                "LOCATION": os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/14"),
            }
        }
    else:
        LATERITE_QUEUE_STORE = "database"
    if SYSTEM.endswith("_encrypted"):  # the job of bench/laterite_app/jobs.py encrypts
        LATERITE_QUEUE_ENCRYPTION_KEYS = [
            {"id": "bench", "key": "YmVuY2gtbm90LXNlY3JldC1iZW5jaC1ub3Qtc2VjcmU="}]
    if SYSTEM.endswith("_history"):  # every finished job leaves a record
        LATERITE_QUEUE_HISTORY = {"keep": "7d"}
    if os.environ.get("BENCH_FLOW") == "queue":  # the flow scenario's queue-limited drain
        LATERITE_QUEUE_LIMITS = {
            "default": {"concurrency": int(os.environ.get("BENCH_FLOW_CONCURRENCY", "10"))}
        }
