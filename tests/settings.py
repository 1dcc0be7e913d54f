"""Settings for the test suite: LATERITE_TEST_DB=sqlite (default) or postgres."""

import importlib.util
import json
import os
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent
SECRET_KEY = "laterite-tests"
DEBUG = False
USE_TZ = True
TIME_ZONE = "UTC"
ALLOWED_HOSTS = ["*"]

DB = os.environ.get("LATERITE_TEST_DB", "sqlite")
# Worker subprocesses started by the tests are told the test database's name.
TEST_NAME = os.environ.get("LATERITE_TEST_DB_NAME")

if DB == "postgres":
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.postgresql",
            "NAME": TEST_NAME or os.environ.get("LATERITE_PG_NAME", "laterite"),
            "USER": os.environ.get("LATERITE_PG_USER", "postgres"),
            "HOST": os.environ.get("LATERITE_PG_HOST", "127.0.0.1"),
            "PORT": os.environ.get("LATERITE_PG_PORT", "5432"),
            "TEST": {"NAME": os.environ.get("LATERITE_PG_TEST_NAME")},
        }
    }
    if os.environ.get("LATERITE_TEST_LISTEN_PORT"):
        # Through a pooler (tests/hosts): idle workers LISTEN on a direct connection.
        DATABASES["listen"] = {**DATABASES["default"],
                               "PORT": os.environ["LATERITE_TEST_LISTEN_PORT"]}
        LATERITE_QUEUE_LISTEN_DATABASE = "listen"
elif DB == "sqlite":
    sqlite_file = os.environ.get("LATERITE_SQLITE_FILE", str(BASE_DIR / "test.sqlite3"))
    Path(sqlite_file).parent.mkdir(parents=True, exist_ok=True)
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": TEST_NAME or sqlite_file,
            # A file (not memory) so worker subprocesses share the test database.
            "TEST": {"NAME": sqlite_file.replace(".sqlite3", "-test.sqlite3")},
            "OPTIONS": {
                "transaction_mode": "IMMEDIATE",
                "timeout": 20,
                "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
            },
        }
    }
else:
    raise RuntimeError(f"LATERITE_TEST_DB is {DB!r}; use sqlite or postgres")

REDIS_URL = os.environ.get("LATERITE_REDIS_URL", "redis://127.0.0.1:6379/15")
CACHES = {
    "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"},
    "redis": {
        "BACKEND": "django_redis.cache.RedisCache",
        "LOCATION": REDIS_URL,
        "OPTIONS": {"CLIENT_CLASS": "django_redis.client.DefaultClient"},
    },
}

# The Redis store on the test session's own Redis Cluster (tests/conftest.py's
# `redis_cluster`, six nodes from LATERITE_TEST_CLUSTER_PORT): the store kind
# `redis_cluster` of LATERITE_TEST_STORES.
CLUSTER_PORT = int(os.environ.get("LATERITE_TEST_CLUSTER_PORT", "7400"))
CACHES["redis_cluster"] = {
    "BACKEND": "django_redis.cache.RedisCache",
    "LOCATION": [f"redis://127.0.0.1:{CLUSTER_PORT + i}/0" for i in range(6)],
    "OPTIONS": {"SOCKET_CONNECT_TIMEOUT": 2, "SOCKET_TIMEOUT": 5},
}

if os.environ.get("LATERITE_TEST_SENTINEL"):
    # tests/hosts: the queue's cache finds its Redis primary through a Sentinel.
    _sentinel_host, _sentinel_port = os.environ["LATERITE_TEST_SENTINEL"].rsplit(":", 1)
    CACHES["redis"] = {
        "BACKEND": "django_redis.cache.RedisCache",
        "LOCATION": f"redis://{os.environ.get('LATERITE_TEST_SENTINEL_SERVICE', 'laterite')}/0",
        "OPTIONS": {
            "CLIENT_CLASS": "django_redis.client.SentinelClient",
            "CONNECTION_FACTORY": "django_redis.pool.SentinelConnectionFactory",
            "SENTINELS": [(_sentinel_host, int(_sentinel_port))],
            "SOCKET_CONNECT_TIMEOUT": 2,
            "SOCKET_TIMEOUT": 5,
        },
    }
if os.environ.get("LATERITE_TEST_REDIS_WAIT"):
    LATERITE_QUEUE_REDIS_WAIT = float(os.environ["LATERITE_TEST_REDIS_WAIT"])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "laterite_django",
    "tests.testapp",
    "tests.hosts",  # the multi-host tests' job (tests/hosts/jobs.py)
]

MIDDLEWARE = [
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
]
ROOT_URLCONF = "tests.urls"
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ]
        },
    }
]
STATIC_URL = "/static/"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

LATERITE_QUEUE_STORE = os.environ.get("LATERITE_TEST_STORE", "database")
LATERITE_QUEUE_REDIS = "redis"
if LATERITE_QUEUE_STORE == "redis_cluster":  # a worker subprocess of a cluster test
    LATERITE_QUEUE_STORE, LATERITE_QUEUE_REDIS = "redis", "redis_cluster"
    LATERITE_QUEUE_REDIS_CLUSTER = True
# The test Redis keeps nothing on disk (--save "" --appendonly no), as meant: no warning
# of it at start, unless a test asks (LATERITE_TEST_REDIS_EPHEMERAL=0).
LATERITE_QUEUE_REDIS_EPHEMERAL = os.environ.get("LATERITE_TEST_REDIS_EPHEMERAL", "1") == "1"
LATERITE_QUEUE_PREFIX = os.environ.get("LATERITE_TEST_PREFIX", "laterite-test")
# Django 6.1 warns (an error here) when mail is sent with no MAILERS; older Djangos
# ignore the setting. The test runner swaps in its in-memory outbox either way.
MAILERS = {"default": {"BACKEND": "django.core.mail.backends.locmem.EmailBackend"}}

LATERITE_QUEUE_QUEUES = ["default", "mail", "low"]
# Short, so tests never wait on it; a test of waking a worker sets a long one.
LATERITE_QUEUE_POLL = float(os.environ.get("LATERITE_TEST_POLL", "0.05"))
# One worker process per `queue_work` unless a test asks for more (--processes).
LATERITE_QUEUE_WORKERS = int(os.environ.get("LATERITE_TEST_WORKERS", "1"))
LATERITE_QUEUE_RETRY_AFTER = float(os.environ.get("LATERITE_TEST_RETRY_AFTER", "90"))
# Web servers started by the tests (tests/wsgi.py, tests/asgi.py) run in the `worker` mode.
LATERITE_QUEUE_MODE = os.environ.get("LATERITE_TEST_MODE", "external")
# The limit tests give their workers limits as JSON.
LATERITE_QUEUE_LIMITS = json.loads(os.environ.get("LATERITE_TEST_LIMITS", "{}"))
LATERITE_QUEUE_SHUTDOWN_GRACE = float(os.environ.get("LATERITE_TEST_SHUTDOWN_GRACE", "5"))
# Recurring schedules of the worker subprocesses a test starts, as JSON.
LATERITE_QUEUE_SCHEDULES = json.loads(os.environ.get("LATERITE_TEST_SCHEDULES", "{}"))
# The job history of the worker subprocesses a test starts, as JSON (off by default).
LATERITE_QUEUE_HISTORY = json.loads(os.environ.get("LATERITE_TEST_HISTORY", "null"))

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "loggers": {
        "laterite": {"handlers": ["console"], "level": os.environ.get(
            "LATERITE_TEST_LOG_LEVEL", "WARNING")},
        # Django 6's Tasks framework logs a failed task on "django.tasks", which reaches
        # Django's own handlers (shown only with DEBUG): shown on stderr here, as the
        # backport's "django_tasks" logger is on Django 5.2 (Python's last resort).
        "django.tasks": {"handlers": ["console"], "level": "WARNING", "propagate": False},
    },
}
if os.environ.get("LATERITE_TEST_NO_LOGGING"):
    # A new project's settings: nothing configures the `laterite` logger.
    del LOGGING

# Django's Tasks framework: django.tasks (Django 6+), or the django_tasks backport (5.2).
if importlib.util.find_spec("django.tasks"):
    TASKS_PACKAGE = "django.tasks"
elif importlib.util.find_spec("django_tasks"):
    TASKS_PACKAGE = "django_tasks"
    INSTALLED_APPS.append("django_tasks")
else:
    TASKS_PACKAGE = None
TASKS = {
    "default": {
        "BACKEND": "laterite_django.tasks.LateriteBackend",
        "QUEUES": LATERITE_QUEUE_QUEUES,
        "OPTIONS": {"TRIES": 2, "BACKOFF": 0, "TIMEOUT": 30, "RESULT_TTL": 3600},
    },
    "immediate": {
        "BACKEND": f"{TASKS_PACKAGE}.backends.immediate.ImmediateBackend",
        "QUEUES": [],
    },
}

# The keys of encrypted job arguments (tests/testapp/encrypted_jobs.py), as JSON in
# LATERITE_TEST_ENCRYPTION_KEYS for a worker subprocess given other keys (rotation).
TEST_KEY_A = {"id": "test-a", "key": "dLuc85pqv+0tvDJ64U8FbDLozUIzHPlfwEb7BMckv0g="}
TEST_KEY_B = {"id": "test-b", "key": "1CoY6kIbsApBGqE7wyV7AGxCgBZtef9UCVishtKUGs4="}
LATERITE_QUEUE_ENCRYPTION_KEYS = json.loads(
    os.environ.get("LATERITE_TEST_ENCRYPTION_KEYS", json.dumps([TEST_KEY_A])))
LATERITE_QUEUE_ENCRYPTION_HASH_KEY = "Iu/AISvy2viEiF7KcjoGArHNNRqKl1h3URgON5SlO1U="
