"""A fair queue's waiting jobs per key (Store.fair_waiting) on every store, kept as jobs
are pushed, claimed, given back, cancelled and cleared; and the turns of keys no waiting
job needs pruned (Store.prune_fair_turns, from tidy) without changing a turn to come."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from laterite_django.core.fairness import NO_KEY, WaitingByKey
from laterite_django.models import FairTurn

from .test_fair import claim_all, fair, values


def turn_keys(store, queue: str = "fair") -> set[str]:
    """The keys whose turn the store keeps for `queue`."""
    if store.transactional_push:
        return set(FairTurn.objects.filter(queue=queue).values_list("key", flat=True))
    fields = store.client.hkeys(store.key("queue", queue, "fair"))
    return {f.decode()[2:] for f in fields if f.decode().startswith("k:")}


def test_waiting_jobs_are_counted_per_key_most_first(store):
    store.push([fair(f"a{i}", "tenant:a") for i in range(5)])
    store.push([fair(f"b{i}", "tenant:b") for i in range(3)])
    store.push([fair(f"n{i}", None) for i in range(2)])
    store.push([fair("c0", "tenant:c")])
    assert store.fair_waiting(top=3) == {"fair": WaitingByKey(
        top=(("tenant:a", 5), ("tenant:b", 3), (NO_KEY, 2)), keys=4)}
    assert store.fair_waiting()["fair"].top[-1] == ("tenant:c", 1)


def test_a_queue_not_served_fairly_has_no_counts(store):
    from tests.stores.test_fair import NewJob  # the plain push of the same job
    now = timezone.now()
    store.push([NewJob(name="tests.record", queue="plain", payload='{"args": [1]}',
                       available_at=now, pushed_at=now, delay=0.0)] * 2)
    assert store.fair_waiting() == {}


def test_counts_follow_claims_releases_cancels_and_clear(store):
    store.push([fair(f"a{i}", "a") for i in range(3)] + [fair("b0", "b")])
    later = fair("a-later", "a")
    later.available_at = later.pushed_at + timedelta(hours=1)
    later.delay = 3600.0
    (delayed_id,) = store.push([later])
    assert store.fair_waiting()["fair"].top == (("a", 4), ("b", 1))  # delayed ones too
    first, second = store.claim(["fair"], "w", 2)
    assert store.fair_waiting()["fair"].top == (("a", 3),)
    assert values([first]) == ["a0"]
    assert store.release(first, first.available_at, "again", uncharged=True)
    assert store.fair_waiting()["fair"].top == (("a", 4),)
    assert store.cancel([delayed_id])[delayed_id] == "cancelled"
    assert store.fair_waiting()["fair"].top == (("a", 3),)
    store.delete([second])
    store.clear("fair")
    assert store.fair_waiting() == {}


def test_turns_of_keys_without_waiting_jobs_are_pruned(store):
    store.push([fair(f"a{i}", "a") for i in range(2)])
    store.push([fair(f"b{i}", "b") for i in range(5)])
    taken = store.claim(["fair"], "w", 4)
    assert values(taken) == ["a0", "b0", "a1", "b1"]
    store.delete(taken)
    assert turn_keys(store) == {"a", "b"}
    assert store.prune_fair_turns() == 1
    assert turn_keys(store) == {"b"}  # b still has jobs waiting
    # a comes back: next in line with b, as it would have been without pruning.
    store.push([fair(f"a{i}", "a") for i in range(2, 4)])
    assert claim_all(store) == ["b2", "a2", "b3", "a3", "b4"]
    store.prune_fair_turns()
    assert turn_keys(store) == set()


def test_a_turn_ahead_of_the_line_is_kept(store):
    # a's turn ends past b's first waiting job: forgetting it would move a ahead of b's
    # jobs at its next push. It stays until the line has caught up with it.
    (_, a1, a2) = store.push([fair(f"a{i}", "a") for i in range(3)])
    store.push([fair(f"b{i}", "b") for i in range(5)])
    taken = store.claim(["fair"], "w", 2)
    assert values(taken) == ["a0", "b0"]
    store.delete(taken)
    store.cancel([a1, a2])  # a has no job waiting, its turn ends after a2's place
    assert store.fair_waiting()["fair"].top == (("b", 4),)
    assert store.prune_fair_turns() == 0
    assert turn_keys(store) == {"a", "b"}
    store.push([fair("a3", "a")])
    assert claim_all(store) == ["b1", "b2", "b3", "a3", "b4"]
    assert store.prune_fair_turns() == 2
    assert turn_keys(store) == set()


def test_tidy_prunes_the_turns_once_a_while(store, monkeypatch):
    store.push([fair("a0", "a")])
    store.delete(store.claim(["fair"], "w"))
    assert turn_keys(store) == {"a"}
    monkeypatch.setattr(store._fair, "pruned_at", 0.0)  # as a store just made
    store.tidy()
    assert turn_keys(store) == set()
    store.push([fair("b0", "b")])
    store.delete(store.claim(["fair"], "w"))
    store.tidy()  # within PRUNE_EVERY of the last: not yet
    assert turn_keys(store) == {"b"}
