"""What the end of a job of a workflow brings: the next link of its chain (pushed in
the step that deletes the job) and the count of its batch (moved in the step that
deletes it or moves it to the failed list). The stores call these; the worker's rules
are unchanged."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .calls import link_job
from .marks import marks_of

if TYPE_CHECKING:
    from ..stores import Claim, NewJob

__all__ = ["End", "any_marked", "ends_of", "ends_of_payloads", "next_links"]


@dataclass(frozen=True, slots=True)
class End:
    """A job of batch `batch` at `position` ended: failed for good, or not."""

    batch: int
    position: int
    failed: bool = False


def any_marked(claims: Sequence[Claim]) -> bool:
    """Whether any of `claims` belongs to a chain or a batch (cheap: a substring test)."""
    return any('"chain":' in c.payload or '"batch":' in c.payload for c in claims)


def next_links(claim: Claim) -> list[NewJob]:
    """The job to push once `claim`'s job succeeded: its chain's next link, if any."""
    chain = marks_of(claim.payload).chain
    if not chain:
        return []
    return [link_job(chain[0], chain=chain[1:] or None)]


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
