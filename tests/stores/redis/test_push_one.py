"""A lone push on Redis runs the lean PUSH_ONE script, every other push PUSH: both must
store a job the same way (its hash, its place in the ready or delayed set, the queue
list, the wake-up list), or a job's life would depend on how it was pushed."""

from __future__ import annotations

import os
from collections.abc import Iterator
from datetime import timedelta

import pytest
from django.utils import timezone

from laterite_django.stores import NewJob, get_store
from laterite_django.stores.redis.keys import WAKE_CAP
from tests.conftest import redis_store_only

PREFIX = f"laterite-test-push-one-{os.getpid()}"
# The store's push asks whether a transaction is open on the jobs' database.
pytestmark = pytest.mark.django_db


@pytest.fixture
def store_kind() -> Iterator[str]:
    with redis_store_only(PREFIX) as kind:
        yield kind


def new(queue: str, **options) -> NewJob:
    now = timezone.now()
    fields = dict(name="tests.record", queue=queue, payload='{"args":["x"],"kwargs":{}}',
                  available_at=now, pushed_at=now)
    return NewJob(**{**fields, **options})


def stored(client, queue: str, job_id: int) -> dict:
    """Everything Redis holds about job `job_id` of `queue`, its id written as <id>."""
    def plain(value: bytes) -> str:
        return value.decode().replace(f"{job_id:019d}", "<id>")

    job = {plain(k): plain(v) for k, v in client.hgetall(f"{PREFIX}:job:{job_id}").items()}
    ready = {plain(m): s for m, s in client.zrange(
        f"{PREFIX}:queue:{queue}:ready", 0, -1, withscores=True)}
    delayed = {plain(m).replace(str(job_id), "<id>"): s for m, s in client.zrange(
        f"{PREFIX}:queue:{queue}:delayed", 0, -1, withscores=True)}
    return {"job": job, "ready": ready, "delayed": delayed,
            "queues": client.sismember(f"{PREFIX}:queues", queue),
            "wake": client.llen(f"{PREFIX}:queue:{queue}:wake")}


@pytest.mark.parametrize("options", [
    {},
    {"priority": 7},
    {"at": timedelta(hours=1)},
    {"retry_until": timedelta(minutes=5)},
    {"priority": -3, "at": timedelta(seconds=30), "retry_until": timedelta(days=1)},
], ids=["due", "priority", "delayed", "retry-until", "all"])
def test_a_lone_push_stores_what_a_push_of_several_stores(store_kind, options):
    store = get_store()
    client = store.client
    now = timezone.now()
    fields = {}
    if "priority" in options:
        fields["priority"] = options["priority"]
    if "at" in options:
        fields["available_at"] = now + options["at"]
    if "retry_until" in options:
        fields["retry_until"] = now + options["retry_until"]
    # The same job alone (PUSH_ONE) in queue "one", and with another (PUSH) in "many".
    (alone,) = store.push([new("one", pushed_at=now, **{"available_at": now, **fields})])
    together, _ = store.push([new("many", pushed_at=now, **{"available_at": now, **fields}),
                              new("other")])
    one, many = stored(client, "one", alone), stored(client, "many", together)
    assert one["job"].pop("queue") == "one" and many["job"].pop("queue") == "many"
    assert one == many
    assert one["job"]["name"] == "tests.record"
    assert bool(one["ready"]) != bool(one["delayed"])
    assert ("retry_until" in one["job"]) == ("retry_until" in options)
    claimed = store.claim(["one"], "w")
    assert [c.id for c in claimed] == ([] if "at" in options else [alone])


def test_lone_pushes_keep_at_most_the_cap_of_wake_up_tokens(store_kind):
    store = get_store()
    client = store.client
    ids = [store.push([new("default")])[0] for _ in range(WAKE_CAP + 5)]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)
    assert client.llen(f"{PREFIX}:queue:default:wake") == WAKE_CAP
    assert store.counts()["default"].waiting == WAKE_CAP + 5


def test_a_lone_job_with_a_unique_key_is_still_pushed_once(store_kind):
    store = get_store()
    first = store.push([new("default", unique_key="k")])
    again = store.push([new("default", unique_key="k")])
    assert first != [None] and again == [None]
    assert store.counts()["default"].waiting == 1
