"""`queue_work` says once, as it starts, what the store's server is set to do that may
lose jobs: a Redis server that evicts keys when full (any `maxmemory-policy` but
`noeviction`) drops job hashes without a word. The database stores have no such
setting; on every store, a server as this machine's runs it says nothing."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest
import redis
from django.conf import settings

from laterite_django.management import store_check

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_store_as_set_up_here_has_no_warning(store, caplog):
    assert store.warnings() == []
    with caplog.at_level(logging.WARNING, logger="laterite"):
        assert store_check.wait_for_store(store) is True
    assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []


@pytest.fixture
def evicting() -> Iterator[None]:
    """The test Redis server set to evict any key when full, for the test's length."""
    client = redis.Redis.from_url(settings.CACHES["redis"]["LOCATION"])
    before = client.config_get("maxmemory-policy")["maxmemory-policy"]
    client.config_set("maxmemory-policy", "allkeys-lru")
    try:
        yield
    finally:
        client.config_set("maxmemory-policy", before)
        client.close()


@pytest.mark.parametrize("store_kind", ["redis"], indirect=True)
def test_a_redis_server_that_evicts_keys_is_said_once_at_start(store, evicting, caplog):
    (warning,) = store.warnings()
    assert "maxmemory-policy allkeys-lru" in warning and "noeviction" in warning
    with caplog.at_level(logging.WARNING, logger="laterite"):
        assert store_check.wait_for_store(store) is True
    said = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert said == [warning]
