"""Claims in batches and what a dead worker leaves behind, and make_due; on every store.

A worker claims up to N jobs and runs them one after another. If it dies, the
job it was running (position 0) is charged its try; the jobs behind it may never
have started, so theirs is not charged (`uncounted`), though their claim still
counts as an attempt: a job that did start there runs again under a new attempt
number, never under the same one. Every requeued job keeps its place in line,
so the one that killed the worker runs first next time, charged.
"""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from django.db import connections
from django.utils import timezone

from laterite_django.stores import NewJob, get_store

LATER = timedelta(hours=1)


def new(queue="default", *, at=None, priority=0):
    now = timezone.now()
    return NewJob(
        name="tests.record",
        queue=queue,
        payload='{"args":["x"],"kwargs":{}}',
        available_at=at or now,
        pushed_at=now,
        priority=priority,
    )


def worker_died(store) -> int:
    """Requeue every claim, as the next worker does once a dead one's claims expire."""
    return store.requeue_abandoned(-LATER.total_seconds(), "worker lost")


def push_in_order(store, count: int) -> list[int]:
    """Push `count` due jobs, each due a second after the previous one."""
    start = timezone.now() - timedelta(minutes=1)
    return store.push([new(at=start + timedelta(seconds=i)) for i in range(count)])


# -- positions -------------------------------------------------------------------


def test_a_claim_numbers_its_batch_in_running_order(store):
    low = store.push([new(queue="low")])[0]
    plain = store.push([new(queue="mail")])[0]
    urgent = store.push([new(queue="mail", priority=5)])[0]
    first = store.push([new()])[0]
    batch = store.claim(["default", "mail", "low"], "w", limit=4)
    assert [c.id for c in batch] == [first, urgent, plain, low]
    assert [c.position for c in batch] == [0, 1, 2, 3]
    # A claim of one, and the next batch, start again at 0.
    more = push_in_order(store, 3)
    assert [(c.id, c.position) for c in store.claim(["default"], "w")] == [(more[0], 0)]
    assert [c.position for c in store.claim(["default"], "w", limit=5)] == [0, 1]


def test_settle_and_claim_numbers_the_next_batch(store):
    ids = push_in_order(store, 4)
    done = store.claim(["default"], "w", limit=2)
    nxt = store.settle_and_claim(done, ["default"], "w", limit=2)
    assert [(c.id, c.position) for c in nxt] == [(ids[2], 0), (ids[3], 1)]


# -- a dead worker's batch ------------------------------------------------------------


def test_a_dead_workers_batch_charges_the_heads_try_only(store):
    ids = push_in_order(store, 3)
    batch = store.claim(["default"], "w", limit=3)
    assert [(c.id, c.position, c.attempts) for c in batch] == [
        (ids[0], 0, 1), (ids[1], 1, 1), (ids[2], 2, 1)]
    due = {c.id: c.available_at for c in batch}
    fresh = store.push([new()])[0]  # due now: behind the requeued jobs

    assert worker_died(store) == 3
    counts = store.counts()["default"]
    assert (counts.waiting, counts.running) == (4, 0)

    head = store.claim(["default"], "w2")
    # The old head is first in line again, at position 0, charged once more.
    assert [(c.id, c.position, c.attempts, c.tries_used) for c in head] == [(ids[0], 0, 2, 2)]
    assert head[0].last_error == "worker lost"
    rest = store.claim(["default"], "w2", limit=3)
    # The others may never have started: a new attempt number each, but their lost
    # claim is not charged (one try used, not two).
    assert [(c.id, c.position, c.attempts, c.uncounted, c.tries_used) for c in rest] == [
        (ids[1], 0, 2, 1, 1), (ids[2], 1, 2, 1, 1), (fresh, 2, 1, 0, 1)]
    # Each kept its available_at, so it kept its place in line.
    assert {c.id: c.available_at for c in [*head, *rest[:2]]} == due


def test_a_job_that_kills_its_worker_runs_uncharged_at_most_once(store):
    first, killer = push_in_order(store, 2)
    batch = store.claim(["default"], "w", limit=2)
    assert store.delete(batch[:1]) == 1  # the first ran; the second kills the worker
    assert worker_died(store) == 1
    again = store.claim(["default"], "w", limit=2)
    # Uncharged once (lost at position 1), but now it is the head.
    assert [(c.id, c.position, c.attempts, c.tries_used) for c in again] == [(killer, 0, 2, 1)]
    assert worker_died(store) == 1
    assert [(c.id, c.attempts, c.tries_used) for c in store.claim(["default"], "w")] == [
        (killer, 3, 2)]
    assert first not in {c.id for c in again}


def test_a_released_job_is_the_head_of_its_next_batch(store):
    ids = push_in_order(store, 2)
    batch = store.claim(["default"], "w", limit=2)
    at = timezone.now()  # both due at once: the older id first
    assert store.release(batch[1], at, "later")
    assert store.release(batch[0], at, "stopped", uncharged=True)
    again = store.claim(["default"], "w", limit=2)
    assert [(c.id, c.position, c.attempts, c.tries_used) for c in again] == [
        (ids[0], 0, 2, 1), (ids[1], 1, 2, 2)]
    # A requeue of the new batch: the head is charged its try, the other is not.
    assert worker_died(store) == 2
    final = store.claim(["default"], "w", limit=2)
    assert [(c.id, c.attempts, c.tries_used) for c in final] == [(ids[0], 3, 2), (ids[1], 3, 2)]


def test_a_live_claim_is_not_requeued(store):
    push_in_order(store, 2)
    batch = store.claim(["default"], "w", limit=2)
    assert store.requeue_abandoned(LATER.total_seconds(), "worker lost") == 0
    assert store.delete(batch) == 2


# -- make_due ---------------------------------------------------------------------


def test_make_due_makes_a_delayed_job_claimable(store):
    delayed = store.push([new(at=timezone.now() + LATER)])[0]
    assert store.claim(["default"], "w") == []
    assert store.make_due([delayed]) == 1
    counts = store.counts()["default"]
    assert (counts.waiting, counts.delayed) == (1, 0)
    claim = store.claim(["default"], "w")[0]
    assert claim.id == delayed and claim.attempts == 1
    assert claim.available_at <= timezone.now()


def test_make_due_leaves_running_jobs_alone_and_counts_the_others(store):
    running_id, waiting, delayed = store.push(
        [new(), new(), new(at=timezone.now() + LATER)])
    running = store.claim(["default"], "w")[0]
    assert running.id == running_id
    missing = delayed + 1000
    assert store.make_due([running_id, waiting, delayed, missing]) == 2
    assert store.make_due([]) == 0
    counts = store.counts()["default"]
    assert (counts.waiting, counts.delayed, counts.running) == (2, 0, 1)
    # The running job's claim is untouched: its worker still settles it.
    assert store.heartbeat([running]) == 1
    assert store.delete([running]) == 1


def test_make_due_keeps_a_waiting_jobs_place_in_line(store):
    older, newer = push_in_order(store, 2)
    assert store.make_due([newer, older]) == 2
    assert [c.id for c in store.claim(["default"], "w", limit=2)] == [older, newer]


def test_make_due_takes_ids_as_strings_and_names_a_bad_one(store):
    delayed = store.push([new(at=timezone.now() + LATER)])[0]
    assert store.make_due([str(delayed)]) == 1
    with pytest.raises(ValueError, match="'seven'"):
        store.make_due(["seven"])


def test_make_due_wakes_a_waiting_worker(store, store_kind):
    delayed = store.push([new(at=timezone.now() + LATER)])[0]
    if store_kind == "redis":
        # The push left wake-up tokens: drop them, so only make_due can wake the waiter.
        store.client.delete(store.key("queue", "default", "wake"))
    stop, woke = threading.Event(), threading.Event()

    def waiter() -> None:
        try:
            get_store().wait(["default"], 60, stop)  # nothing due for an hour
            woke.set()
        finally:
            get_store().close()
            connections.close_all()

    thread = threading.Thread(target=waiter)
    thread.start()
    try:
        # A wake sent before the waiter listens is lost on PostgreSQL: send again
        # (the job is due now, so each call counts it) until it is heard.
        for _ in range(20):
            assert store.make_due([delayed]) == 1
            if woke.wait(0.5):
                break
        assert woke.is_set(), "make_due did not wake a worker waiting 60 s"
    finally:
        stop.set()
        thread.join(70)
