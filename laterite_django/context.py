"""What a running job can know about itself, and what a push returns."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

from .core.progress import check as check_progress
from .exceptions import Cancelled, Snooze
from .resumable import Checkpoints, Step

if TYPE_CHECKING:
    from .flow.cancel import CancelWatch

__all__ = ["JobContext", "Pushed", "set_batch_adder"]

# Adds calls to a batch and returns how many: the workflows', which sit above the job's
# context, set at start-up (apps.ready).
_add_to_batch: Callable[[int, Any], int] | None = None


def set_batch_adder(add: Callable[[int, Any], int]) -> None:
    """Register how `JobContext.add_to_batch` adds calls to a batch (called by ready())."""
    global _add_to_batch
    _add_to_batch = add


@dataclass(frozen=True, slots=True)
class JobContext:
    """Handed to a job function that declares a `cx` parameter."""

    id: int | str | None  # None when the job ran inline
    name: str
    queue: str
    attempt: int  # from 1
    pushed_at: datetime
    schedule: str | None = None  # the schedule that pushed it, if one did
    scheduled_at: datetime | None = None  # the tick it was pushed for (--run: that moment)
    batch_id: int | None = None  # the batch it belongs to, if any (workflows)
    # Where `progress` goes (the worker's ProgressDesk); None: nowhere (inline, run_jobs).
    report_progress: Callable[[object], None] | None = field(
        default=None, repr=False, compare=False)

    def progress(self, done: float, total: float | None = None, note: str = "") -> None:
        """Say how far the job is: `done` of `total` (None if not known), with a short
        note. Cheap: the worker's heartbeat thread stores the latest value at most once a
        second; the admin and `queue_status` show it while the job runs."""
        reported = check_progress(done, total, note)
        if self.report_progress is not None:
            self.report_progress(reported)
    # Set by the worker: tells the job a cancel was asked (flow.cancel).
    cancel_watch: CancelWatch | None = field(default=None, repr=False, compare=False)

    @property
    def cancelled(self) -> bool:
        """True once someone asked to cancel this job (`laterite_django.cancel`)."""
        return self.cancel_watch is not None and self.cancel_watch.asked

    def add_to_batch(self, calls: Any) -> int:
        """Add calls (made with `job.call(...)`) to this job's batch: its callbacks wait
        for them too. Return how many were added."""
        if self.batch_id is None:
            raise ValueError(f"Job {self.name!r} #{self.id} is not part of a batch.")
        if _add_to_batch is None:
            raise RuntimeError("laterite_django is not ready: is it in INSTALLED_APPS?")
        return _add_to_batch(self.batch_id, calls)

    def check(self) -> None:
        """Raise Cancelled if this job was cancelled; call it where stopping is safe."""
        if self.cancelled:
            raise Cancelled("cancelled")

    # Set by the worker: the job's checkpoint, read from its store and saved under its
    # claim (resumable). The default keeps it in memory for one run (inline mode).
    checkpoints: Checkpoints = field(default_factory=Checkpoints, repr=False, compare=False)

    def iterate(self, source: Any, by: str | Sequence[str] | None = None,
                chunk: int = 100) -> Iterator[Any]:
        """Walk `source` chunk by chunk, saving the cursor with the job after each chunk.

        `source` is a queryset, walked by keyset pagination on `by` (a unique field, or
        a tuple of fields, in the queryset's order; default "pk"), or a function
        `fetch(cursor, n) -> (items, next_cursor)` (cursor None at the start,
        next_cursor None at the end; JSON values). A later run of the job (after its
        worker stopped at a chunk boundary, or died) starts after the last saved chunk.
        """
        return self.checkpoints.iterate(source, by=by, chunk=chunk)

    @property
    def position(self) -> Any:
        """The saved cursor of the `iterate` loop running now (None before its first
        chunk)."""
        return self.checkpoints.position

    def step(self, name: str) -> AbstractContextManager[Step]:
        """A block that runs once across attempts: `with cx.step("charge") as step:`,
        where `step.todo` is True until a run of the block has completed and been saved,
        and `step.result` (JSON) is saved with it and given back to later attempts."""
        return self.checkpoints.step(name)

    def snooze(self, seconds: float) -> None:
        """Send the job back to run again `seconds` from now, its tries unchanged (raises
        Snooze; `@job(max_snoozes=N)` caps how often)."""
        raise Snooze(seconds)


@dataclass(frozen=True, slots=True)
class Pushed:
    """The outcome of one push: queued (with its id), ran inline, or a duplicate dropped."""

    status: Literal["queued", "ran", "duplicate"]
    id: int | str | None = None
    result: object = None  # the return value of an inline run
    # A debounced push that replaced the waiting job holding its key (that job's id),
    # rather than store a new one.
    debounced: bool = False

    @property
    def queued(self) -> bool:
        return self.status == "queued"
