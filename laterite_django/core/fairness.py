"""Fair claims: a queue's waiting jobs served key by key in turn (LATERITE_QUEUE_FAIRNESS,
`@job(fair_key=...)`), as start-time fair queuing with the tags given at the push.

    LATERITE_QUEUE_FAIRNESS = {"imports": {"tenant:big": 1, "default_weight": 1}}

Each fair job gets a virtual start time, its tag, when it is pushed: the later of the
queue's virtual time (the tag of its first waiting job of that priority) and the end of
its key's last job (each job of a key takes 1/weight of a turn, TURN units of virtual
time at weight 1). The claim takes a queue's due jobs of a priority by tag, so the keys
waiting are served in turn, in proportion to their weights, and a key that arrives late
starts at the queue's virtual time: neither starved nor starving the others. Once
nothing waits, the line starts again after the last place given. Jobs without a key
share one turn (the key ""). The tag takes the place of the due time in the order of
the claim (Redis: the job's member in its ready set; the database stores: its
`available_at`, for a job due now), so the claims themselves are unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["DEFAULT_WEIGHT", "NO_KEY", "PRUNE_EVERY", "TOP_KEYS", "TURN", "WEIGHTS",
           "WaitingByKey", "cost_of", "fairness_problem", "weight_of"]

# Virtual time (microseconds of the due-time scale) one job of a key of weight 1 takes.
# Small, since on the database stores a job's place in line is its due time (so their
# claim, its index and its limits stay as they are): a key far ahead of the others has
# its jobs due a little later, 10 us a job at weight 1, well within how fast a queue
# drains (100,000 jobs a second for one key alone).
TURN = 10
# The weights a key may have: a job costs TURN / weight, at least 1 us.
WEIGHTS = (0.01, 10)
# The name, among a queue's weights, of the weight of keys it does not name.
DEFAULT_WEIGHT = "default_weight"
# The key the jobs of a fair queue pushed without one share, as stored.
NO_KEY = ""
# The keys with the most waiting jobs shown per fair queue (the admin, queue_status).
TOP_KEYS = 10
# Seconds between two prunings of the turns of keys no waiting job needs (Store.tidy).
PRUNE_EVERY = 60.0


@dataclass(frozen=True, slots=True)
class WaitingByKey:
    """A fair queue's waiting jobs (due or not, not running) per fair key: the keys with
    the most, most first, as (key, jobs) with NO_KEY for the jobs without one; and how
    many keys have a waiting job in all."""

    top: tuple[tuple[str, int], ...]
    keys: int


def fairness_problem(value: Any) -> str | None:
    """Say what is wrong with a LATERITE_QUEUE_FAIRNESS value, naming it; None if good."""
    if not isinstance(value, Mapping):
        return "it must be a dict of queue name -> {key: weight, 'default_weight': weight}"
    for queue, weights in value.items():
        if not isinstance(queue, str) or not queue:
            return f"queue name {queue!r} is not a non-empty string"
        if not isinstance(weights, Mapping):
            return f"the weights of {queue!r} ({weights!r}) must be a dict of key -> weight"
        for key, weight in weights.items():
            if not isinstance(key, str):
                return f"the key {key!r} of queue {queue!r} is not a str"
            if (isinstance(weight, bool) or not isinstance(weight, int | float)
                    or not WEIGHTS[0] <= weight <= WEIGHTS[1]):
                return (f"the weight of {key!r} in queue {queue!r} ({weight!r}) must be a "
                        f"number from {WEIGHTS[0]} to {WEIGHTS[1]}")
    return None


def weight_of(fairness: Mapping[str, Mapping[str, float]], queue: str, key: str | None
              ) -> float:
    """The weight of `key` (None: the jobs without a key) in `queue`."""
    weights = fairness.get(queue) or {}
    if key is not None and key in weights:
        return weights[key]
    return weights.get(DEFAULT_WEIGHT, 1)


def cost_of(weight: float) -> int:
    """The virtual time one job of a key of `weight` takes (at least 1)."""
    return max(1, round(TURN / weight))
