"""The Redis store on a Redis Cluster of the session's own (tests/conftest.py's
`redis_cluster`: six redis-servers, three primaries with a replica each)."""

from __future__ import annotations

import os
from datetime import datetime, timedelta

import pytest
from django.conf import settings
from django.test import override_settings
from django.utils import timezone

from laterite_django.checks import check_settings
from laterite_django.core.values import NewJob
from laterite_django.exceptions import LateriteConfigurationError
from laterite_django.stores import build_store, get_store, reset_store
from tests.conftest import flush_redis_cluster

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_cluster_has_three_primaries_each_with_a_replica(redis_cluster) -> None:
    from redis.cluster import RedisCluster

    assert len(redis_cluster.primaries()) == 3
    for port in redis_cluster.ports:
        assert redis_cluster.client(port).cluster("info")["cluster_state"] == "ok"
    roles = [redis_cluster.client(port).info("replication")["role"]
             for port in redis_cluster.ports]
    assert sorted(roles) == ["master"] * 3 + ["slave"] * 3
    client = RedisCluster(host=redis_cluster.host, port=redis_cluster.ports[0])
    try:
        # Keys of three hash tags that hash to slots of the three primaries.
        nodes = {client.get_node_from_key(f"{{q{i}}}").port for i in range(30)}
        assert nodes == set(redis_cluster.primaries())
    finally:
        client.close()


# -- the settings check: a cluster alias that needs a single server is refused -------

CLUSTER = settings.CACHES["redis_cluster"]


def cluster_errors() -> list:
    return [m for m in check_settings() if m.id in ("laterite.E052", "laterite.E053")]


@override_settings(LATERITE_QUEUE_STORE="redis", LATERITE_QUEUE_REDIS="redis_cluster",
                   LATERITE_QUEUE_REDIS_CLUSTER=True)
def test_a_cluster_alias_of_node_urls_is_clean() -> None:
    assert cluster_errors() == []


@override_settings(LATERITE_QUEUE_STORE="redis", LATERITE_QUEUE_REDIS="redis_cluster",
                   LATERITE_QUEUE_REDIS_CLUSTER="yes")
def test_the_cluster_setting_is_a_bool() -> None:
    (error,) = cluster_errors()
    assert error.id == "laterite.E052" and "'yes'" in error.msg


@pytest.mark.parametrize(("change", "said"), [
    ({"LOCATION": "redis://127.0.0.1:7400/3"},
     "names database 3: a Redis Cluster has database 0 only; drop the /3"),
    ({"OPTIONS": {"CLIENT_CLASS": "django_redis.client.SentinelClient"}},
     "OPTIONS CLIENT_CLASS is 'django_redis.client.SentinelClient'"),
    ({"OPTIONS": {"SENTINELS": [("127.0.0.1", 26379)]}}, "OPTIONS SENTINELS"),
    ({"LOCATION": "unix:///tmp/redis.sock"}, "is a socket"),
])
def test_a_cluster_alias_that_needs_a_single_server_is_refused(change, said) -> None:
    caches = {**settings.CACHES, "redis_cluster": {**CLUSTER, **change}}
    with override_settings(CACHES=caches, LATERITE_QUEUE_STORE="redis",
                           LATERITE_QUEUE_REDIS="redis_cluster",
                           LATERITE_QUEUE_REDIS_CLUSTER=True):
        (error,) = cluster_errors()
        assert error.id == "laterite.E053"
        assert said in error.msg and "LATERITE_QUEUE_REDIS_CLUSTER is True" in error.msg
        assert "LOCATION" in error.hint and "LATERITE_QUEUE_REDIS_CLUSTER = False" in error.hint
        with pytest.raises(LateriteConfigurationError, match="not one for a cluster"):
            build_store("redis")
    # The same alias on a single server is no cluster problem.
    with override_settings(CACHES=caches, LATERITE_QUEUE_STORE="redis",
                           LATERITE_QUEUE_REDIS="redis_cluster"):
        assert cluster_errors() == []


@override_settings(LATERITE_QUEUE_STORE="redis", LATERITE_QUEUE_REDIS="redis_cluster",
                   LATERITE_QUEUE_REDIS_CLUSTER=True, LATERITE_QUEUE_PREFIX="app{1}")
def test_a_prefix_with_a_brace_is_refused_on_a_cluster() -> None:
    (error,) = cluster_errors()
    assert error.id == "laterite.E053" and "'app{1}' holds a brace" in error.msg
    with pytest.raises(LateriteConfigurationError, match="holds a brace"):
        build_store("redis")


# -- the key layout: every key of the prefix in one slot --------------------------


def new_job(queue: str, due: datetime, **fields: object) -> NewJob:
    return NewJob(name="tests.noop", queue=queue, payload="{}", available_at=due,
                  pushed_at=timezone.now(), **fields)  # type: ignore[arg-type]


@pytest.fixture
def cluster_store(redis_cluster):
    """The Redis store on the session's cluster, under a prefix of the test's own."""
    prefix = f"laterite-test-{os.getpid()}"
    with override_settings(LATERITE_QUEUE_STORE="redis", LATERITE_QUEUE_REDIS="redis_cluster",
                           LATERITE_QUEUE_REDIS_CLUSTER=True, LATERITE_QUEUE_PREFIX=prefix):
        reset_store()
        flush_redis_cluster(prefix)
        try:
            yield get_store()
        finally:
            flush_redis_cluster(prefix)
            reset_store()


def test_every_key_of_the_queue_lives_in_the_slot_of_its_prefix(cluster_store, redis_cluster
                                                                 ) -> None:
    from redis.cluster import RedisCluster

    store = cluster_store
    assert store.prefix == "{" + settings.LATERITE_QUEUE_PREFIX + "}"
    now = timezone.now()
    ids = store.push([new_job(queue, now) for queue in ("default", "mail", "reports")])
    store.push([new_job("mail", now + timedelta(minutes=1), unique_key="k")])
    claims = store.claim(["reports", "mail", "default"], "w1", limit=2)
    assert {c.id for c in claims} <= set(ids) and len(claims) == 2
    assert store.delete(claims[:1]) == 1
    client = RedisCluster(host=redis_cluster.host, port=redis_cluster.ports[0])
    try:
        keys = [k.decode() for k in client.scan_iter(match=f"{store.prefix}:*", count=1000)]
        assert len(keys) >= 8, keys  # jobs, queues' sets, the id counter, unique keys
        slots = {client.keyslot(key) for key in keys}
        assert slots == {client.keyslot(store.prefix)}
        # On the primary the store sends to; its replica has them too.
        node = client.get_node_from_key(store.prefix)
        assert store.client.connection_pool.connection_kwargs["port"] == node.port
    finally:
        client.close()
    assert store.counts()["mail"].waiting + store.counts()["mail"].delayed >= 1
