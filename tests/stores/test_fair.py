"""Fair claims on every store: a fair queue's waiting keys served in turn (core/fairness.py),
by weight, jobs without a key sharing one turn, priority first; a released job back in its
key's turn; the concurrency limits applied on top."""

from __future__ import annotations

import json

import pytest
from django.db import transaction
from django.utils import timezone

from laterite_django.core.fairness import cost_of
from laterite_django.core.limits import Limits, QueueLimit
from laterite_django.core.values import NewJob


@pytest.fixture
def fair_store(store):
    """The store (each one serves fair queues in turn)."""
    return store


def fair(value: str, key: str | None, weight: float = 1, priority: int = 0,
         queue: str = "fair") -> NewJob:
    """A push of tests.record(value) into a fair queue, as JobFunction makes it."""
    now = timezone.now()
    return NewJob(name="tests.record", queue=queue,
                  payload=json.dumps({"args": [value], "kwargs": {}}), available_at=now,
                  pushed_at=now, priority=priority, delay=0.0, fair_key=key,
                  fair_cost=cost_of(weight))


def values(claims) -> list[str]:
    return [json.loads(c.payload)["args"][0] for c in claims]


def claim_all(store, queue: str = "fair", limits: Limits | None = None) -> list[str]:
    """Claim a queue's jobs one at a time; their values in the order claimed."""
    taken = []
    while claims := store.claim([queue], "w", 1, limits):
        taken += values(claims)
    return taken


def test_keys_are_served_in_turn(fair_store):
    fair_store.push([fair(f"big{i}", "tenant:big") for i in range(10)])
    fair_store.push([fair("a0", "tenant:a")])
    fair_store.push([fair("b0", "tenant:b")])
    taken = claim_all(fair_store)
    assert taken[:3] == ["big0", "a0", "b0"]
    assert taken[3:] == [f"big{i}" for i in range(1, 10)]


def test_a_batch_claim_takes_one_job_of_each_key_first(fair_store):
    fair_store.push([fair(f"big{i}", "tenant:big") for i in range(10)])
    fair_store.push([fair(f"a{i}", "tenant:a") for i in range(2)])
    fair_store.push([fair("b0", "tenant:b")])
    claims = fair_store.claim(["fair"], "w", 5)
    assert sorted(values(claims)[:3]) == ["a0", "b0", "big0"]
    assert sorted(values(claims)[3:]) == ["a1", "big1"]


def test_a_key_takes_turns_in_proportion_to_its_weight(fair_store):
    fair_store.push([fair(f"h{i}", "heavy", weight=3) for i in range(9)]
                    + [fair(f"l{i}", "light") for i in range(3)])
    taken = claim_all(fair_store)
    assert taken[:8] == ["h0", "l0", "h1", "h2", "h3", "l1", "h4", "h5"]


def test_jobs_without_a_key_share_one_turn(fair_store):
    fair_store.push([fair(f"n{i}", None) for i in range(5)])
    fair_store.push([fair("k0", "key")])
    assert claim_all(fair_store)[:3] == ["n0", "k0", "n1"]


def test_priority_comes_before_fairness(fair_store):
    fair_store.push([fair(f"big{i}", "big") for i in range(3)])
    fair_store.push([fair("urgent", "big", priority=5)])
    fair_store.push([fair("small", "small")])
    assert claim_all(fair_store) == ["urgent", "big0", "small", "big1", "big2"]


def test_a_released_job_comes_back_in_its_keys_turn(fair_store):
    fair_store.push([fair(f"big{i}", "big") for i in range(5)])
    fair_store.push([fair("small", "small")])
    (first,) = fair_store.claim(["fair"], "w")
    assert values([first]) == ["big0"]
    # Given back where it was in line (as a worker gives back a job it did not finish).
    assert fair_store.release(first, first.available_at, "again", uncharged=True)
    assert claim_all(fair_store) == ["big0", "small", "big1", "big2", "big3", "big4"]


def test_a_key_arriving_late_starts_at_the_queues_turn(fair_store):
    fair_store.push([fair(f"big{i}", "big") for i in range(20)])
    assert values(fair_store.claim(["fair"], "w", 10)) == [f"big{i}" for i in range(10)]
    fair_store.push([fair(f"late{i}", "late") for i in range(2)])
    assert claim_all(fair_store)[:4] == ["big10", "late0", "big11", "late1"]


def test_a_concurrency_limit_applies_on_top(fair_store):
    fair_store.push([fair(f"big{i}", "big") for i in range(5)])
    fair_store.push([fair(f"s{i}", "small") for i in range(5)])
    limits = Limits({"fair": QueueLimit(concurrency=3)})
    claims = fair_store.claim(["fair"], "w", 10, limits)
    assert values(claims) == ["big0", "s0", "big1"]


@pytest.mark.django_db(transaction=True)
def test_a_push_inside_a_transaction_keeps_its_turn(fair_store):
    fair_store.push([fair(f"big{i}", "big") for i in range(5)])
    with transaction.atomic():
        small = [fair("small", "small")]
        if fair_store.transactional_push:
            fair_store.push(small)
        else:  # Redis: through the outbox, moved at the commit
            fair_store.push_on_commit(small)
    assert claim_all(fair_store) == ["big0", "small", "big1", "big2", "big3", "big4"]


def tenant_job(tenant: str, i: int) -> NewJob:
    """A push of tests.fair_record(tenant, i) (its fair_key: "tenant:<tenant>")."""
    now = timezone.now()
    return NewJob(name="tests.fair_record", queue="default",
                  payload=json.dumps({"args": [tenant, i], "kwargs": {}}), available_at=now,
                  pushed_at=now, delay=0.0, fair_key=f"tenant:{tenant}", fair_cost=cost_of(1))


@pytest.mark.django_db(transaction=True)
def test_a_job_retried_from_the_failed_list_takes_its_keys_turn(fair_store):
    fair_store.push([tenant_job("small", 0)])
    (claim,) = fair_store.claim(["default"], "w")
    failed_id = fair_store.fail(claim, "boom")
    assert failed_id is not None
    fair_store.push([tenant_job("big", i) for i in range(5)])
    assert fair_store.retry([failed_id]) == 1
    taken = []
    while claims := fair_store.claim(["default"], "w"):
        tenant, i = json.loads(claims[0].payload)["args"]
        taken.append(f"{tenant}{i}")
    assert taken == ["big0", "small0", "big1", "big2", "big3", "big4"]
