"""`chain(a.call(...), b.call(...), ...)`: calls run one after another.

Only the first link is pushed; it carries the rest in its payload (workflows.marks).
When a link succeeds, the step that deletes it pushes the next (one transaction on
the database store, one Lua script on Redis), so a worker killed at any instant
neither skips nor doubles a link. A link that fails for good keeps the rest of the
chain with its failed row: retrying the row resumes the chain.
"""

from __future__ import annotations

from collections.abc import Sequence

from asgiref.sync import sync_to_async

from .. import capture
from ..async_push import refuse_event_loop
from ..calls import JobCall
from ..conf import settings
from ..context import Pushed

__all__ = ["Chain", "chain"]


class Chain:
    """Calls to run in order, each once the one before it succeeded."""

    def __init__(self, calls: Sequence[JobCall]) -> None:
        if not calls:
            raise ValueError("chain() needs at least one call.")
        for call in calls:
            if not isinstance(call, JobCall):
                raise TypeError(f"chain() takes calls made with job.call(...), not {call!r:.80}.")
        self.calls = list(calls)

    def __repr__(self) -> str:
        return f"<Chain {' -> '.join(c.job.name for c in self.calls)}>"

    def push(self) -> Pushed:
        """Push the first call, carrying the others; in inline mode, run them all now,
        in order (a failure raises and stops the chain)."""
        first = self.calls[0]
        refuse_event_loop(first.job.name)
        if settings.MODE == "inline" and not capture.capturing():
            pushed = Pushed("ran")
            for call in self.calls:
                pushed = call.job.enqueue(call.args, call.kwargs)
            return pushed
        new = first.new_job(chain=[c.link() for c in self.calls[1:]] or None)
        if capture.capturing():
            return capture.record(first.job, [new])[0]
        return first.job.store_jobs([new])[0]

    async def apush(self) -> Pushed:
        """`push()` from async code, off the event loop."""
        return await sync_to_async(self.push, thread_sensitive=True)()


def chain(*calls: JobCall) -> Chain:
    """Calls to run one after another: `chain(a.call(1), b.call(2)).push()`."""
    return Chain(calls)
