"""Which finished jobs the stores record in the job history (LATERITE_QUEUE_HISTORY),
read where they settle jobs: one lookup and one test while history is off."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..conf import settings
from ..core.history import HistoryPolicy, policy_of
from ..core.values import Claim

__all__ = ["history", "recorded"]

# The policy made from the settings' value, kept while the value is the same object
# (conf keeps a checked value until a setting changes).
_made: tuple[Any, HistoryPolicy | None] = (None, None)


def history() -> HistoryPolicy | None:
    """The history policy in force; None while history is off (the default)."""
    value = settings.HISTORY
    made = _made
    if made[0] is value:
        return made[1]
    return _make(value)


def _make(value: Any) -> HistoryPolicy | None:
    global _made
    policy = policy_of(value)
    _made = (value, policy)
    return policy


def recorded(policy: HistoryPolicy, claims: Sequence[Claim]) -> list[Claim]:
    """Those of `claims` whose queue keeps history under `policy`."""
    if policy.keep is not None and not policy.queues:
        return list(claims)
    return [c for c in claims if policy.records(c.queue)]
