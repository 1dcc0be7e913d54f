"""Flow control: pause a queue, limit how many of its jobs run and how fast, cancel a job.

The state lives in the store (`Store.pause`, `Store.cancel`, the limited claim), so
it holds across every worker on every host; this package holds the rules and the
worker's side. `pause_queue`, `resume_queue` and `cancel` are the Python calls
behind `queue_pause`, `queue_resume` and `queue_cancel`.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..core.values import job_ids
from ..stores import get_store

__all__ = ["cancel", "pause_queue", "resume_queue"]


def pause_queue(*names: str) -> None:
    """Pause these queues: no worker claims their jobs once LATERITE_QUEUE_POLL
    seconds have passed; pushes are still accepted and running jobs finish."""
    get_store().pause(_queue_names(names))


def resume_queue(*names: str) -> None:
    """Resume paused queues; the workers waiting for them are woken."""
    get_store().resume(_queue_names(names))


def cancel(job_id: int | str) -> str:
    """Cancel one job; return what became of it (a `flow.cancel.Outcome` word).

    A waiting or delayed job goes to the failed list now, as cancelled; a running
    one is told (`cx.cancelled`, `cx.check()`) and interrupted after a grace; a job
    that finished already (or never existed) is left alone: "finished".
    """
    given: list = [job_id]
    (outcome,) = get_store().cancel(job_ids(given)).values()
    return outcome


def _queue_names(names: Iterable[str]) -> list[str]:
    queues = list(names)
    for name in queues:
        if not isinstance(name, str) or not name:
            raise ValueError(f"A queue name must be a non-empty string, not {name!r}.")
    return queues
