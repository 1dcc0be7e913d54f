"""What travels between the worker and a store: a job to store, a claim, a running
job, a queue's counts; and job ids checked as the stores take them."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .progress import Progress

__all__ = ["Claim", "NewJob", "QueueCounts", "Running", "job_ids"]


@dataclass(slots=True)
class NewJob:
    """A job about to be stored."""

    name: str
    queue: str
    payload: str
    available_at: datetime
    pushed_at: datetime
    retry_until: datetime | None = None
    unique_key: str | None = None
    priority: int = 0
    # A job declared with `concurrency` (flow/limits): at most `concurrency_limit` jobs
    # with this key run at once.
    concurrency_key: str | None = None
    concurrency_limit: int | None = None
    # Seconds after the store's now at which the job is due, counted by the store's own
    # clock (PostgreSQL's, Redis's), the one a claim compares due times with: a
    # pushing host whose clock runs ahead or behind neither delays its jobs nor moves
    # them ahead of older ones. None: due at `available_at`, an absolute moment
    # (push_at). `available_at` is then this host's reckoning of the same moment,
    # which stores on one host (SQLite) and inline runs use.
    delay: float | None = None
    # A debounced push (`debounce=S`, its key in `unique_key`): a waiting job holding the
    # key is replaced (these arguments, due S seconds from the store's now) rather than
    # a new one stored, but never made due later than `debounce_max` seconds after the
    # push that stored it (None: no such deadline). `delay` is then S too.
    debounce: float | None = None
    debounce_max: float | None = None
    # A job of a fair queue (core/fairness.py): the virtual time one job of its key takes
    # (the key's weight's cost_of), None if the queue is not served fairly; `fair_key`,
    # its key (None: the jobs without a key, which share one turn).
    fair_key: str | None = None
    fair_cost: int | None = None


@dataclass(slots=True)
class Claim:
    """A job a worker has claimed: the job's data plus the claim's token."""

    id: int
    name: str
    queue: str
    payload: str
    attempts: int  # claims so far, this one included: `cx.attempt`
    pushed_at: datetime
    token: str
    retry_until: datetime | None = None
    unique_key: str | None = None
    priority: int = 0
    last_error: str = ""
    available_at: datetime | None = None
    # Its place in the batch it was claimed with: 0 starts at once; a later one
    # may never start if the worker dies, so a lost claim at position > 0 is
    # returned without charging it a try (see requeue_abandoned).
    position: int = 0
    # Earlier claims not charged a try (given back, or lost behind the head of their
    # batch): see `tries_used`.
    uncounted: int = 0
    # A cancel was asked while an earlier claim ran and it came back to its queue (its
    # worker died, or it was released as the cancel came): it must not run again
    # (rules.before_run fails it as cancelled).
    cancel_requested: bool = False
    # When its run under this claim started and ended (epoch seconds by its worker's
    # clock; 0: not known), for its history record (LATERITE_QUEUE_HISTORY).
    started: float = 0.0
    ended: float = 0.0

    @property
    def tries_used(self) -> int:
        """The tries this job has been charged, this claim included: its claims less
        the lost ones that may never have started. Tries and backoff go by it."""
        return self.attempts - self.uncounted


@dataclass(slots=True)
class Running:
    """A running job, as `queue_status` shows it."""

    id: int
    name: str
    queue: str
    attempts: int
    claimed_by: str
    progress: Progress | None = None


@dataclass(slots=True)
class QueueCounts:
    """How many jobs of one queue are waiting (due), delayed (not yet due),
    running (claimed) and failed: the four states used everywhere."""

    waiting: int = 0
    delayed: int = 0
    running: int = 0
    failed: int = 0
    extra: dict[str, int] = field(default_factory=dict)
    # The states counted only up to a cap (`Store.counts(cap=...)`): each holds at
    # least its count, maybe more.
    capped: set[str] = field(default_factory=set)

    @property
    def total(self) -> int:
        return self.waiting + self.delayed + self.running

    # The names of 0.1 (`queue_status --json` still prints them, see CHANGELOG).
    @property
    def pending(self) -> int:
        return self.waiting

    @property
    def reserved(self) -> int:
        return self.running


def job_ids(ids: Iterable[int]) -> list[int]:
    """Return `ids` as a list of ints; a value that is not a job id is a clear error."""
    result = []
    for value in ids:
        if isinstance(value, bool) or not isinstance(value, (int, str)):
            raise TypeError(f"A job id must be an integer, not {value!r}.")
        try:
            result.append(int(value))
        except ValueError:
            raise ValueError(f"A job id must be an integer, not {value!r}.") from None
    return result
