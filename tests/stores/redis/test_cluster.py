"""The Redis store on a Redis Cluster of the session's own (tests/conftest.py's
`redis_cluster`: six redis-servers, three primaries with a replica each)."""

from __future__ import annotations

import os
import time
from datetime import datetime, timedelta

import psutil
import pytest
from django.conf import settings
from django.test import override_settings
from django.utils import timezone

from bench.hosts.redis_cluster import RedisClusterSet
from laterite_django.checks import check_settings
from laterite_django.core.values import NewJob
from laterite_django.exceptions import (
    LateriteConfigurationError,
    PushNotReplicated,
    StoreUnavailable,
)
from laterite_django.stores import build_store, get_store, reset_store
from laterite_django.stores.redis.scripts import SHAS, SOURCES, evalsha
from laterite_django.testing import isolated_redis_prefix
from tests.conftest import CLUSTER_PORT, Workers, flush_redis_cluster
from tests.testapp import jobs
from tests.testapp.models import Record
from tests.worker.test_processes import kill_tree, waiting

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


# -- failover: the slot's primary SIGKILLed under pushes --------------------------


def push_until(store, acknowledged: list[int], count: int, timeout: float = 60) -> int:
    """Push one job at a time until `count` more pushes were acknowledged (a replica
    has them: LATERITE_QUEUE_REDIS_WAIT); return how many were refused meanwhile."""
    target, refused = len(acknowledged) + count, 0
    deadline = time.monotonic() + timeout
    while len(acknowledged) < target:
        assert time.monotonic() < deadline, f"{refused} pushes refused, none acknowledged"
        try:
            acknowledged += [i for i in store.push([new_job("default", timezone.now())])
                             if i is not None]
        except StoreUnavailable:  # PushNotReplicated too: stored, not acknowledged
            refused += 1
            time.sleep(0.05)
    return refused


@pytest.mark.slow
def test_a_primary_killed_under_pushes_loses_no_replicated_push() -> None:
    """Pushes with LATERITE_QUEUE_REDIS_WAIT while the primary of the prefix's slot is
    SIGKILLed and its replica promoted: the same store (no restart) raises
    StoreUnavailable meanwhile, then pushes to the new primary (PushNotReplicated
    until the old primary is back as its replica); every push it acknowledged is
    there, and every job is claimed once."""
    port = CLUSTER_PORT + 10  # a cluster of the test's own: it loses a primary
    prefix = f"laterite-failover-{os.getpid()}"
    with RedisClusterSet(port) as cluster:
        caches = {**settings.CACHES, "failover": cluster.cache_config()}
        with override_settings(CACHES=caches, LATERITE_QUEUE_STORE="redis",
                               LATERITE_QUEUE_REDIS="failover",
                               LATERITE_QUEUE_REDIS_CLUSTER=True,
                               LATERITE_QUEUE_PREFIX=prefix, LATERITE_QUEUE_REDIS_WAIT=2.0):
            store = build_store("redis")
            acknowledged: list[int] = []
            assert push_until(store, acknowledged, 200) == 0
            primary = store.client.connection_pool.connection_kwargs["port"]
            cluster.kill_primary(primary)
            # Until a replica is promoted: refused (the node is gone); then stored on the
            # new primary but not confirmed by a replica (it has none yet).
            deadline = time.monotonic() + 60
            while True:
                with pytest.raises(StoreUnavailable) as refused:
                    store.push([new_job("default", timezone.now())])
                if isinstance(refused.value, PushNotReplicated):
                    break
                assert time.monotonic() < deadline, "no new primary after 60 s"
                time.sleep(0.05)
            assert store.client.connection_pool.connection_kwargs["port"] != primary
            cluster.restart(primary)
            push_until(store, acknowledged, 200)
            claimed: list[int] = []
            while batch := store.claim(["default"], "w1", limit=100):
                claimed += [c.id for c in batch]
                store.delete(batch)
            assert len(set(claimed)) == len(claimed)  # each once
            assert set(acknowledged) <= set(claimed), "an acknowledged push was lost"


def test_a_script_call_declares_a_hash_tag_prefix_as_its_key() -> None:
    """On a cluster the prefix, a hash tag, is the call's one key (the client routes by
    it, a node not serving its slot answers MOVED); on one server no key, as before."""
    assert evalsha("claim", ["{app}", "1"]) == ("EVALSHA", SHAS["claim"], 1, "{app}", "{app}", "1")
    assert evalsha("claim", ["app", "1"]) == ("EVALSHA", SHAS["claim"], 0, "app", "1")
    assert evalsha("push", ["{app}"], "EVAL") == ("EVAL", SOURCES["push"], 1, "{app}", "{app}")


@pytest.mark.slow
def test_workers_and_pushers_go_on_through_a_primary_failover() -> None:
    """Four worker processes drain jobs.chaos while the test pushes more (with
    LATERITE_QUEUE_REDIS_WAIT) and the primary of the prefix's slot is SIGKILLed: the
    same workers, not restarted, go on with the promoted replica; every job pushed
    before and every push acknowledged during the failover runs."""
    port = CLUSTER_PORT + 10
    prefix = f"laterite-failover-{os.getpid()}"
    with RedisClusterSet(port) as cluster:
        caches = {**settings.CACHES, "redis_cluster": cluster.cache_config()}
        with override_settings(CACHES=caches, LATERITE_QUEUE_STORE="redis",
                               LATERITE_QUEUE_REDIS="redis_cluster",
                               LATERITE_QUEUE_REDIS_CLUSTER=True, LATERITE_QUEUE_PREFIX=prefix,
                               LATERITE_QUEUE_REDIS_WAIT=2.0):
            reset_store()
            store = get_store()
            try:
                total = 1500
                jobs.chaos.push_many([(i,) for i in range(total)])
                workers = Workers("redis_cluster")
                proc = workers.start("--processes", "4", env={
                    "LATERITE_TEST_CLUSTER_PORT": str(port), "LATERITE_TEST_RETRY_AFTER": "3",
                    "LATERITE_TEST_LOG_LEVEL": "ERROR"})
                try:
                    deadline = time.monotonic() + 60
                    while Record.objects.filter(kind="chaos").count() < 300:
                        assert time.monotonic() < deadline, "the workers ran nothing"
                        time.sleep(0.1)
                    primary = store.client.connection_pool.connection_kwargs["port"]
                    cluster.kill_primary(primary)
                    # Pushes meanwhile: acknowledged, or stored unconfirmed
                    # (PushNotReplicated, its ids), or refused.
                    acknowledged, stored, number = [], [], total
                    restarted = False
                    deadline = time.monotonic() + 90
                    while len(acknowledged) < 100:
                        assert time.monotonic() < deadline, "no push acknowledged again"
                        try:
                            jobs.chaos.push(number)
                            acknowledged.append(number)
                        except PushNotReplicated:
                            stored.append(number)
                            if not restarted:  # a new primary: bring its replica back
                                cluster.restart(primary)
                                restarted = True
                        except StoreUnavailable:
                            time.sleep(0.05)
                        number += 1
                    deadline = time.monotonic() + 120
                    while True:
                        try:
                            if waiting(store) == 0:
                                break
                        except StoreUnavailable:
                            pass
                        assert time.monotonic() < deadline, f"{waiting(store)} jobs stuck"
                        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
                        time.sleep(0.5)
                    assert psutil.Process(proc.pid).is_running()
                finally:
                    kill_tree(proc)
                    workers.stop_all()
                ran = {int(v) for v in Record.objects.filter(kind="chaos")
                       .values_list("value", flat=True)}
                assert set(range(total)) <= ran, "a job pushed before the failover never ran"
                assert set(acknowledged) <= ran, "an acknowledged push never ran"
                assert set(stored) <= ran
            finally:
                flush_redis_cluster(prefix)
                reset_store()


def test_an_isolated_prefix_leaves_no_key_on_the_cluster(cluster_store) -> None:
    """laterite_django.testing.isolated_redis_prefix deletes the keys of its prefix,
    which on a cluster live under its hash tag."""
    with isolated_redis_prefix() as prefix:
        store = get_store()
        assert store.prefix == "{" + prefix + "}"
        store.push([new_job("default", timezone.now())])
        assert list(store.client.scan_iter(match=f"{store.prefix}:*"))
    assert not list(store.client.scan_iter(match=f"{store.prefix}:*"))
