"""Store.beat_worker, remove_worker and workers: the live workers' list, on every store
(its beats dated by the store's clock; lost entries shown, then removed)."""

from __future__ import annotations

import time
from datetime import timedelta

from django.utils import timezone

from laterite_django.core.workers import KEEP_LOST, WorkerInfo
from laterite_django.models import WorkerRecord
from laterite_django.stores import get_store, reset_store
from laterite_django.stores.database import DatabaseStore


def info(worker_id: str = "host-a:101", **changes: object) -> WorkerInfo:
    values: dict = {"id": worker_id, "name": worker_id, "host": worker_id.split(":")[0],
                    "pid": int(worker_id.split(":")[1]), "version": "1.2.3",
                    "queues": ["default", "mail"], "concurrency": 1,
                    "started_at": timezone.now().replace(microsecond=0), "jobs": []}
    values.update(changes)
    return WorkerInfo(**values)


def set_beat_back(store, worker_id: str, seconds: float) -> None:
    """Date a worker's last beat `seconds` earlier, as if it had stopped beating."""
    if isinstance(store, DatabaseStore):
        row = WorkerRecord.objects.get(pk=worker_id)
        row.beat_at -= timedelta(seconds=seconds)
        row.save(update_fields=["beat_at"])
        return
    client = store.client
    key = store.key("workers", worker_id)
    beat = int(client.hget(key, "beat_at")) - int(seconds * 1_000_000)
    client.hset(key, "beat_at", beat)
    client.zadd(store.key("workers"), {worker_id: beat})


def test_a_beat_lists_the_worker_and_the_next_one_updates_it(store):
    assert store.workers() == []
    first = info(jobs=[])
    store.beat_worker(first)
    [listed] = store.workers()
    assert (listed.id, listed.name, listed.host, listed.pid, listed.version) == (
        "host-a:101", "host-a:101", "host-a", 101, "1.2.3")
    assert listed.queues == ["default", "mail"]
    assert listed.concurrency == 1
    assert listed.started_at == first.started_at
    assert listed.jobs == []
    assert 0 <= listed.age < 5
    assert listed.beat_at is not None
    assert abs((listed.beat_at - timezone.now()).total_seconds()) < 5
    assert not listed.lost(90)
    beat_before = listed.beat_at

    time.sleep(0.01)
    store.beat_worker(info(jobs=[7, 9]))
    [listed] = store.workers()
    assert listed.jobs == [7, 9]
    assert listed.beat_at > beat_before


def test_workers_are_listed_by_host_then_pid_and_removed_at_their_stop(store):
    for worker_id in ("host-b:5", "host-a:30", "host-a:4"):
        store.beat_worker(info(worker_id, concurrency=4))
    assert [w.id for w in store.workers()] == ["host-a:4", "host-a:30", "host-b:5"]
    assert {w.concurrency for w in store.workers()} == {4}
    store.remove_worker("host-a:30")
    store.remove_worker("host-z:1")  # not listed: nothing to do
    assert [w.id for w in store.workers()] == ["host-a:4", "host-b:5"]


def test_a_worker_that_stopped_beating_is_shown_lost(store):
    store.beat_worker(info("host-a:1"))
    store.beat_worker(info("host-a:2"))
    set_beat_back(store, "host-a:1", 100)
    lost, alive = store.workers()
    assert lost.id == "host-a:1"
    assert 99 < lost.age < 110
    assert lost.lost(90) and not lost.lost(120)
    assert not alive.lost(90)


def test_entries_lost_longer_than_kept_are_removed(store):
    store.beat_worker(info("host-a:1"))
    store.beat_worker(info("host-a:2"))
    set_beat_back(store, "host-a:1", KEEP_LOST.total_seconds() + 60)
    set_beat_back(store, "host-a:2", KEEP_LOST.total_seconds() - 60)
    # A store that has not removed any yet removes them at its next beat.
    reset_store()
    fresh = get_store()
    try:
        fresh.beat_worker(info("host-b:3"))
    finally:
        fresh.close()
    assert [w.id for w in store.workers()] == ["host-a:2", "host-b:3"]
    if not isinstance(store, DatabaseStore):
        # Redis: each entry expires by itself once lost that long.
        ttl = store.client.ttl(store.key("workers", "host-b:3"))
        assert KEEP_LOST.total_seconds() - 10 < ttl <= KEEP_LOST.total_seconds()
