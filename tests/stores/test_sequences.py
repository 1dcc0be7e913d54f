"""Ordered sequences on every store (core/sequences.py): of the jobs of one key only the
head may be claimed, the rest held in push order; the head's end lets the next go; a
retry holds the rest; a failure for good holds them (wait) or not (continue) until the
failed head is retried, forgotten or its sequence released; cancel, clear and make_due
keep a sequence whole."""

from __future__ import annotations

import json
from datetime import timedelta

from django.utils import timezone

from laterite_django.core.sequences import with_sequence
from laterite_django.core.values import NewJob


def job(value: str, key: str | None, go_on: bool = False, queue: str = "seq",
        delay: float = 0.0) -> NewJob:
    """A push of tests.record(value), of sequence `key`, as JobFunction makes it."""
    now = timezone.now()
    text = json.dumps({"args": [value], "kwargs": {}}, separators=(",", ":"))
    if key is not None:
        text = with_sequence(text, key, go_on)
    return NewJob(name="tests.record", queue=queue, payload=text,
                  available_at=now + timedelta(seconds=delay), pushed_at=now, delay=float(delay))


def values(claims) -> list[str]:
    return sorted(json.loads(c.payload)["args"][0] for c in claims)


def take(store, queue: str = "seq") -> list:
    return store.claim([queue], "w", 50)


def test_only_the_head_of_each_key_is_claimed_and_the_next_follows_in_push_order(store):
    store.push([job("a0", "a"), job("a1", "a"), job("b0", "b")])
    store.push([job("a2", "a"), job("plain", None)])
    claims = take(store)
    assert values(claims) == ["a0", "b0", "plain"]
    assert take(store) == []
    store.delete([c for c in claims if values([c]) == ["a0"]])
    second = take(store)
    assert values(second) == ["a1"]
    # The claim that settles the head takes the next one in the same call.
    third = store.settle_and_claim(second, ["seq"], "w", 50)
    assert values(third) == ["a2"]
    store.settle_and_claim(third, ["seq"], "w", 50)
    # The key is free again: a new push is its head at once.
    store.push([job("a3", "a")])
    assert values(take(store)) == ["a3"]


def test_a_head_waiting_for_its_retry_holds_the_rest(store):
    store.push([job("a0", "a"), job("a1", "a")])
    (head,) = take(store)
    assert store.release(head, timezone.now(), "boom")
    (again,) = take(store)
    assert again.id == head.id
    assert take(store) == []
    store.release(again, timedelta(seconds=0.2), "boom")
    assert take(store) == []  # the head is not due yet, and nothing passes it


def test_a_failed_head_holds_the_rest_until_retried(store):
    store.push([job("a0", "a"), job("a1", "a"), job("a2", "a")])
    (head,) = take(store)
    failed_id = store.fail(head, "gave up")
    assert take(store) == []
    (held,) = store.held_sequences()
    assert (held.key, held.job_id, held.waiting) == ("a", head.id, 2)
    assert (held.queue, held.failed_id) == ("seq", failed_id)
    # Retried, it is the head again, before those that waited behind it.
    assert store.retry([failed_id]) == 1
    if hasattr(store, "move_outbox"):
        store.move_outbox()
    (retried,) = take(store)
    assert values([retried]) == ["a0"]
    assert store.held_sequences() == []
    assert take(store) == []
    assert values(store.settle_and_claim([retried], ["seq"], "w", 50)) == ["a1"]


def test_forgetting_the_failed_head_lets_the_rest_go_on(store):
    store.push([job("a0", "a"), job("a1", "a")])
    (head,) = take(store)
    failed_id = store.fail(head, "gave up")
    assert take(store) == []
    assert store.forget([failed_id]) == 1
    assert values(take(store)) == ["a1"]
    assert store.held_sequences() == []


def test_releasing_a_held_sequence_lets_it_go_on_and_its_head_runs_last_if_retried(store):
    store.push([job("a0", "a"), job("a1", "a")])
    (head,) = take(store)
    failed_id = store.fail(head, "gave up")
    assert store.release_sequence("a") is True
    assert store.release_sequence("a") is False  # not held any more
    (nxt,) = take(store)
    assert values([nxt]) == ["a1"]
    store.retry([failed_id])
    if hasattr(store, "move_outbox"):
        store.move_outbox()
    assert take(store) == []  # behind a1, which runs
    assert values(store.settle_and_claim([nxt], ["seq"], "w", 50)) == ["a0"]


def test_continue_lets_the_rest_go_on_after_a_failure(store):
    store.push([job("a0", "a", go_on=True), job("a1", "a", go_on=True)])
    (head,) = take(store)
    store.fail(head, "gave up")
    assert values(take(store)) == ["a1"]
    assert store.held_sequences() == []


def test_cancel_of_a_waiting_head_holds_the_sequence_and_of_a_held_job_skips_it(store):
    ids = store.push([job("a0", "a"), job("a1", "a"), job("a2", "a")])
    store.cancel([ids[1]])  # a held job: it just goes
    store.cancel([ids[0]])  # the waiting head: as failed for good
    assert take(store) == []
    (held,) = store.held_sequences()
    assert (held.key, held.job_id, held.waiting) == ("a", ids[0], 1)
    failed = {row.job_id: row.pk for row in store.failed_jobs()}
    store.forget([failed[ids[0]]])
    assert values(take(store)) == ["a2"]


def test_make_due_does_not_let_a_held_job_pass_its_head(store):
    ids = store.push([job("a0", "a"), job("a1", "a")])
    store.make_due([ids[1]])
    assert values(take(store)) == ["a0"]


def test_a_cleared_queue_lets_its_sequences_go_on(store):
    store.push([job("a0", "a", queue="one"), job("a1", "a", queue="two"),
                job("a2", "a", queue="one")])
    assert store.clear("one") >= 1
    assert values(take(store, "two")) == ["a1"]


def test_a_delayed_job_promoted_keeps_its_due_time(store):
    store.push([job("a0", "a"), job("a1", "a", delay=60)])
    (head,) = take(store)
    store.delete([head])
    assert take(store) == []
    assert store.next_due(["seq"]) > timezone.now() + timedelta(seconds=30)


def test_pushes_inside_a_transaction_keep_their_order(store):
    """Inside atomic(): on the database stores in the caller's transaction, on Redis
    through the outbox, moved after the commit in the order pushed."""
    from django.db import transaction

    from tests.testapp import jobs

    with transaction.atomic():
        for n in range(3):
            jobs.seq_step.push("t", n)
    claims = store.claim(["low"], "w", 10)
    assert [json.loads(c.payload)["args"][1] for c in claims] == [0]
    assert [json.loads(c.payload)["args"][1]
            for c in store.settle_and_claim(claims, ["low"], "w", 10)] == [1]
