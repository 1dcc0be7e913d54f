"""Settings of every process of the multi-host runs, from the environment:
HOSTS_STORE (database or redis), HOSTS_PG_HOST / HOSTS_PG_PORT, HOSTS_REDIS_URL,
HOSTS_RETRY_AFTER, HOSTS_RUN_DIR (where each process writes the jobs it ran);
HOSTS_SENTINEL / HOSTS_SENTINEL_SERVICE and HOSTS_REDIS_WAIT for the failover runs;
HOSTS_LISTEN_PORT (a direct port for LISTEN) when HOSTS_PG_PORT is PgBouncer's."""

import os

SECRET_KEY = "bench-hosts-not-secret"
DEBUG = False
USE_TZ = True
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
INSTALLED_APPS = [
    "django.contrib.contenttypes",
    "django.contrib.auth",
    "laterite_django",
    "bench.hosts.project",
]
DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": os.environ.get("HOSTS_PG_NAME", "laterite_hosts"),
        "USER": "postgres",
        "HOST": os.environ.get("HOSTS_PG_HOST", "127.0.0.1"),
        "PORT": os.environ.get("HOSTS_PG_PORT", "5432"),
    }
}
if os.environ.get("HOSTS_LISTEN_PORT"):
    # Through PgBouncer: idle workers LISTEN on a direct connection.
    DATABASES["listen"] = {**DATABASES["default"], "PORT": os.environ["HOSTS_LISTEN_PORT"]}
    LATERITE_QUEUE_LISTEN_DATABASE = "listen"
CACHES = {
    "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"},
    "queue": {
        "BACKEND": "django_redis.cache.RedisCache",
        "LOCATION": os.environ.get("HOSTS_REDIS_URL", "redis://127.0.0.1:6379/9"),
        "OPTIONS": {"SOCKET_CONNECT_TIMEOUT": 5, "SOCKET_TIMEOUT": 30},
    },
}
if os.environ.get("HOSTS_SENTINEL"):
    # The failover runs (bench/hosts/failover.py): the primary found through a Sentinel.
    _host, _port = os.environ["HOSTS_SENTINEL"].rsplit(":", 1)
    CACHES["queue"] = {
        "BACKEND": "django_redis.cache.RedisCache",
        "LOCATION": f"redis://{os.environ['HOSTS_SENTINEL_SERVICE']}/0",
        "OPTIONS": {
            "CLIENT_CLASS": "django_redis.client.SentinelClient",
            "CONNECTION_FACTORY": "django_redis.pool.SentinelConnectionFactory",
            "SENTINELS": [(_host, int(_port))],
            "SOCKET_CONNECT_TIMEOUT": 2,
            "SOCKET_TIMEOUT": 5,
        },
    }
if os.environ.get("HOSTS_REDIS_WAIT"):
    LATERITE_QUEUE_REDIS_WAIT = float(os.environ["HOSTS_REDIS_WAIT"])
LATERITE_QUEUE_STORE = os.environ.get("HOSTS_STORE", "database")
LATERITE_QUEUE_REDIS = "queue"
LATERITE_QUEUE_PREFIX = "hosts"
LATERITE_QUEUE_RETRY_AFTER = float(os.environ.get("HOSTS_RETRY_AFTER", "90"))
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "loggers": {"laterite": {"handlers": ["console"], "level": "WARNING"}},
}
