"""System checks for LATERITE_QUEUE_STORE = "redis": each broken cache setup is a clear
error with a hint."""

from __future__ import annotations

import sys
from urllib.parse import urlsplit

import pytest
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.test import override_settings

from laterite_django.checks import check_settings
from laterite_django.exceptions import LateriteConfigurationError
from laterite_django.stores import build_store

__all__: list[str] = []

REDIS = settings.CACHES["redis"]
# The test Redis's database number (LATERITE_REDIS_URL, 15 by default), and another one.
DB = int(urlsplit(REDIS["LOCATION"]).path.strip("/") or 0)
OTHER_DB = (DB + 1) % 16


def on_db(location: str, db: int) -> str:
    """`location` with its database number replaced by `db`."""
    return urlsplit(location)._replace(path=f"/{db}").geturl()


def redis_errors() -> list:
    return [m for m in check_settings() if m.id in {f"laterite.E01{i}" for i in range(5)}]


def only(messages: list, code: str):
    assert [m.id for m in messages] == [code], messages
    return messages[0]


@override_settings(LATERITE_QUEUE_STORE="redis", LATERITE_QUEUE_REDIS="redis")
def test_a_django_redis_cache_is_clean():
    assert redis_errors() == []


@override_settings(LATERITE_QUEUE_STORE="redis", LATERITE_QUEUE_REDIS="queue")
def test_alias_not_in_caches():
    error = only(redis_errors(), "laterite.E010")
    assert "LATERITE_QUEUE_REDIS is 'queue'" in error.msg
    assert "'default', 'redis'" in error.msg and "django_redis" in error.hint


@override_settings(
    LATERITE_QUEUE_STORE="redis",
    LATERITE_QUEUE_REDIS="local",
    CACHES={**settings.CACHES, "local": settings.CACHES["default"]},
)
def test_alias_of_a_cache_that_is_not_django_redis():
    error = only(redis_errors(), "laterite.E012")
    assert "'local'" in error.msg and "LocMemCache" in error.msg
    assert "django_redis.cache.RedisCache" in error.hint


@override_settings(
    LATERITE_QUEUE_STORE="redis",
    CACHES={
        **settings.CACHES,
        "redis": {
            "BACKEND": "django_redis.cache.RedisCache",
            "LOCATION": [REDIS["LOCATION"], REDIS["LOCATION"]],
            "OPTIONS": {"CLIENT_CLASS": "django_redis.client.ShardClient"},
        },
    },
)
def test_a_sharded_django_redis_cache_is_refused():
    error = only(redis_errors(), "laterite.E012")
    assert "ShardClient" in error.msg and "sharded" in error.hint


@override_settings(
    LATERITE_QUEUE_STORE="redis",
    CACHES={**settings.CACHES, "redis": {**REDIS, "LOCATION": "nonsense://127.0.0.1"}},
)
def test_a_cache_that_cannot_connect_at_all():
    error = only(redis_errors(), "laterite.E013")
    assert "'redis'" in error.msg and "'nonsense://127.0.0.1'" in error.msg


@override_settings(
    LATERITE_QUEUE_STORE="redis",
    CACHES={**settings.CACHES, "redis": {**REDIS, "LOCATION": "redis2://u:s3cret@127.0.0.1"}},
)
def test_a_password_in_the_location_is_not_shown():
    error = only(redis_errors(), "laterite.E013")
    assert "redis2://u:***@127.0.0.1" in error.msg and "s3cret" not in error.msg


@override_settings(LATERITE_QUEUE_STORE="redis", LATERITE_QUEUE_REDIS="redis")
def test_django_redis_not_installed(monkeypatch: pytest.MonkeyPatch):
    # A None entry makes `import django_redis` raise ImportError, as if it were absent.
    monkeypatch.setitem(sys.modules, "django_redis", None)
    error = only(redis_errors(), "laterite.E011")
    assert "django-redis is not installed" in error.msg
    assert error.hint == "Install django-redis and hiredis (the 'redis' extra)."


@override_settings(LATERITE_QUEUE_STORE="redis", LATERITE_QUEUE_REDIS="default",
                   LATERITE_QUEUE_MODE="inline")
def test_inline_mode_stores_nothing_so_needs_no_redis():
    assert redis_errors() == []


@override_settings(LATERITE_QUEUE_STORE="redis", LATERITE_QUEUE_REDIS="missing")
def test_manage_py_check_fails_on_a_bad_redis_alias():
    with pytest.raises(SystemCheckError, match=r"laterite\.E010"):
        call_command("check")


# -- the queue's cache must be its own: cache.clear() is FLUSHDB -----------------------


def refused(code: str = "laterite.E014") -> str:
    """The check's error, and the same text from building the store."""
    error = only(redis_errors(), code)
    assert "its own cache alias" in error.hint and "database number" in error.hint
    assert "clear()" in error.msg
    with pytest.raises(LateriteConfigurationError) as raised:
        build_store("redis")
    assert error.msg in str(raised.value) and error.hint in str(raised.value)
    return error.msg


@override_settings(
    LATERITE_QUEUE_STORE="redis",
    LATERITE_QUEUE_REDIS="default",
    CACHES={"default": REDIS},
)
def test_the_site_cache_cannot_hold_the_queue():
    assert "LATERITE_QUEUE_REDIS is 'default'" in refused()


@override_settings(LATERITE_QUEUE_STORE="redis", SESSION_CACHE_ALIAS="redis")
def test_the_session_cache_cannot_hold_the_queue():
    assert "SESSION_CACHE_ALIAS" in refused()


@pytest.mark.parametrize("location", [
    REDIS["LOCATION"],
    REDIS["LOCATION"].replace("127.0.0.1", "localhost"),
    REDIS["LOCATION"].replace(":6379", ""),
    [REDIS["LOCATION"], f"redis://127.0.0.1:6380/{DB}"],
])
def test_a_cache_on_the_same_redis_database_cannot_hold_the_queue(location):
    caches = {**settings.CACHES, "pages": {
        "BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": location}}
    with override_settings(LATERITE_QUEUE_STORE="redis", CACHES=caches):
        message = refused()
    assert "'pages'" in message and f"127.0.0.1:6379/{DB}" in message


@pytest.mark.parametrize("location", [
    on_db(REDIS["LOCATION"], OTHER_DB),
    REDIS["LOCATION"].replace(":6379", ":6380"),
    f"unix:///tmp/redis.sock?db={DB}",
])
def test_a_cache_on_another_redis_database_is_fine(location):
    caches = {**settings.CACHES, "pages": {**REDIS, "LOCATION": location}}
    with override_settings(LATERITE_QUEUE_STORE="redis", CACHES=caches):
        assert redis_errors() == []
        build_store("redis")
