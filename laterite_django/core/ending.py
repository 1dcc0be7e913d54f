"""What the end of a job of a workflow brings to its batch: the count moved in the step
that deletes the job or moves it to the failed list. The stores call these (the next
link of a chain: stores/callbacks.py)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .marks import marks_of

if TYPE_CHECKING:
    from .values import Claim

__all__ = ["End", "any_marked", "ends_of", "ends_of_payloads"]


@dataclass(frozen=True, slots=True)
class End:
    """A job of batch `batch` at `position` ended: failed for good, or not."""

    batch: int
    position: int
    failed: bool = False


def any_marked(claims: Sequence[Claim]) -> bool:
    """Whether any of `claims` belongs to a chain or a batch (cheap: a substring test)."""
    return any('"chain":' in c.payload or '"batch":' in c.payload for c in claims)


def ends_of(claims: Sequence[Claim], failed: bool = False) -> list[End]:
    """The batch ends of `claims` (those of a batch), as they ended."""
    return ends_of_payloads([c.payload for c in claims], failed)


def ends_of_payloads(payloads: Sequence[str], failed: bool = False) -> list[End]:
    """The batch ends of the jobs of these payloads (those of a batch)."""
    ends = []
    for text in payloads:
        if '"batch":' in text:
            batch = marks_of(text).batch
            if batch is not None:
                ends.append(End(batch[0], batch[1], failed))
    return ends
