"""The Redis store through django-redis's Sentinel support: a failover of the primary
under running workers and pushers, and LATERITE_QUEUE_REDIS_WAIT's confirmed pushes."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from django.test import override_settings
from django.utils import timezone

from bench.hosts.sentinel import RedisSentinelSet
from laterite_django.exceptions import PushNotReplicated, StoreUnavailable
from laterite_django.stores import NewJob, get_store, reset_store
from tests.conftest import Stderr, wait_for
from tests.testapp.models import Record

__all__: list[str] = []

pytestmark = [pytest.mark.parametrize("store_kind", ["redis"], indirect=True), pytest.mark.slow]


@pytest.fixture
def redis_set(store_kind: str) -> Iterator[RedisSentinelSet]:
    """A primary, a replica and a Sentinel of their own; the test's store goes there."""
    with RedisSentinelSet() as found, override_settings(
        CACHES={"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"},
                "redis": found.cache_config(0)}):
        reset_store()
        try:
            yield found
        finally:
            get_store().close()
            reset_store()


def jobs(values: list[str]) -> list[NewJob]:
    now = timezone.now()
    return [NewJob(name="tests.record", queue="default", available_at=now, pushed_at=now,
                   payload=json.dumps({"args": [value], "kwargs": {}})) for value in values]


def push_until_accepted(values: list[str]) -> None:
    """Push, trying again while the store says it is away (during the failover)."""
    def pushed() -> bool:
        try:
            get_store().push(jobs(values))
        except StoreUnavailable:
            return False
        return True

    wait_for(pushed, timeout=90, every=0.2)


def in_sync(redis_set: RedisSentinelSet) -> bool:
    primary = redis_set.client(redis_set.primary).info("replication")
    replica = redis_set.client(redis_set.replica()).info("replication")
    return primary["master_repl_offset"] == replica.get("slave_repl_offset")


def test_the_queue_goes_on_across_a_failover(redis_set, workers, transactional_db):
    env = {"LATERITE_TEST_SENTINEL": f"{redis_set.host}:{redis_set.ports['sentinel']}",
           "LATERITE_TEST_SENTINEL_SERVICE": redis_set.service}
    worker = workers.start("--processes", "2", env=env)
    stderr = Stderr(worker)
    before = [f"before-{i}" for i in range(200)]
    push_until_accepted(before)
    wait_for(lambda: Record.objects.filter(kind="record").count() >= 20, timeout=90)
    # What the replica has when the primary dies survives it: wait for that, so the
    # test asks only that nothing the replica had is lost.
    wait_for(lambda: in_sync(redis_set), timeout=30)
    redis_set.kill_primary()
    redis_set.wait_for_failover()
    after = [f"after-{i}" for i in range(200)]
    push_until_accepted(after)  # the new primary knows none of the scripts: NOSCRIPT
    expected = set(before) | set(after)
    wait_for(lambda: set(Record.objects.filter(kind="record").values_list("value", flat=True))
             >= expected, timeout=120)
    worker.terminate()
    worker.wait(60)
    assert worker.returncode == 0, stderr.text()
    ran = list(Record.objects.filter(kind="record").values_list("value", flat=True))
    assert set(ran) == expected
    # Jobs claimed or finished on the old primary after the replica's last copy run
    # again: at most what two workers held then (their claims' batches).
    assert len(ran) - len(expected) <= 2 * 100


def test_a_push_waits_for_a_replica_when_asked(redis_set, transactional_db):
    with override_settings(LATERITE_QUEUE_REDIS_WAIT=1):
        reset_store()
        ids = get_store().push(jobs(["confirmed"]))
        assert ids[0] is not None
        redis_set.pause_replica()
        try:
            with pytest.raises(PushNotReplicated) as raised:
                get_store().push(jobs(["unconfirmed"]))
        finally:
            redis_set.resume_replica()
        assert "no replica confirmed them within 1 s" in str(raised.value)
        assert raised.value.ids[0] is not None  # on the primary all the same
        assert sum(c.waiting for c in get_store().counts().values()) == 2


def test_an_unconfirmed_push_from_the_outbox_is_not_pushed_again(redis_set, transactional_db):
    from django.db import transaction

    from laterite_django.models import OutboxJob

    with override_settings(LATERITE_QUEUE_REDIS_WAIT=0.2):
        reset_store()
        store = get_store()
        redis_set.pause_replica()
        try:
            with transaction.atomic():
                store.push_on_commit(jobs(["outboxed"]))
        finally:
            redis_set.resume_replica()
        # On the primary, though unconfirmed: moved, so no sweep pushes it again.
        assert OutboxJob.objects.count() == 0
        assert store.sweep_outbox() == 0
        assert sum(c.waiting for c in store.counts().values()) == 1
