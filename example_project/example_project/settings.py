"""A small shop that sends its e-mails and charges cards in background jobs.

EXAMPLE_STORE chooses where the data and the jobs live:

- `sqlite` (the default): both in db.sqlite3 beside manage.py; nothing to run.
- `postgres`: both in PostgreSQL (EXAMPLE_PG_NAME, EXAMPLE_PG_HOST, EXAMPLE_PG_PORT,
  EXAMPLE_PG_USER, EXAMPLE_PG_PASSWORD; default database `laterite_example` on
  127.0.0.1:5432 as `postgres`; EXAMPLE_PG_TEST_NAME names `manage.py test`'s database).
- `redis`: the data in db.sqlite3, the jobs in Redis (EXAMPLE_REDIS_URL, default
  redis://127.0.0.1:6379/1), under the key prefix `example`.
"""

import os
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent
STORE = os.environ.get("EXAMPLE_STORE", "sqlite")
if STORE not in ("sqlite", "postgres", "redis"):
    raise ImproperlyConfigured(f"EXAMPLE_STORE is {STORE!r}; use sqlite, postgres or redis.")

SECRET_KEY = "example-only-not-secret"
DEBUG = True
ALLOWED_HOSTS = ["*"]
USE_TZ = True
TIME_ZONE = "UTC"

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "laterite_django",
    "shop",
]
MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
]
ROOT_URLCONF = "example_project.urls"
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
if STORE == "postgres":
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.postgresql",
            "NAME": os.environ.get("EXAMPLE_PG_NAME", "laterite_example"),
            "HOST": os.environ.get("EXAMPLE_PG_HOST", "127.0.0.1"),
            "PORT": os.environ.get("EXAMPLE_PG_PORT", "5432"),
            "USER": os.environ.get("EXAMPLE_PG_USER", "postgres"),
            "PASSWORD": os.environ.get("EXAMPLE_PG_PASSWORD", ""),
            # `manage.py test`'s database (by default test_ and NAME).
            "TEST": {"NAME": os.environ.get("EXAMPLE_PG_TEST_NAME")},
        }
    }
else:
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": BASE_DIR / "db.sqlite3",
            # What laterite needs from SQLite: several workers write at once without
            # "database is locked" (WAL, IMMEDIATE transactions, a busy timeout).
            "OPTIONS": {
                "transaction_mode": "IMMEDIATE",
                "timeout": 20,
                "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
            },
        }
    }

if STORE == "redis":
    CACHES = {
        "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"},
        # The queue's own cache alias, on a Redis database no other cache uses.
        "queue": {
            "BACKEND": "django_redis.cache.RedisCache",
            "LOCATION": os.environ.get("EXAMPLE_REDIS_URL", "redis://127.0.0.1:6379/1"),
        },
    }
    LATERITE_QUEUE_STORE = "redis"
    LATERITE_QUEUE_REDIS = "queue"
    LATERITE_QUEUE_PREFIX = "example"

STATIC_URL = "static/"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

LATERITE_QUEUE_QUEUES = ["default", "mail"]
# A recurring job: every `queue_work` runs the scheduler, and each tick is pushed once.
# Every 2 seconds so that the demo shows it; a real report would use a cron rule such
# as "0 7 * * mon-fri" (pip install -e "<clone>[schedules]").
LATERITE_QUEUE_SCHEDULES = {
    "sales-report": {"job": "shop.sales_report", "every": 2},
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"short": {"format": "%(asctime)s %(levelname)s %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "short"}},
    "loggers": {"laterite": {"handlers": ["console"],
                             "level": os.environ.get("EXAMPLE_LOG_LEVEL", "INFO")}},
}
