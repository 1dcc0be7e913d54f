"""A job's checkpoint: what a long job saved so that a later run picks up where this one
stopped (`cx.iterate`'s cursors, the results of `cx.step` blocks that ran, how many
times it was snoozed).

Stored with the job as one JSON text (the `checkpoint` column, the Redis job's
`checkpoint` field), written only under the job's current claim: a worker whose claim
was lost cannot overwrite what a newer run saved. This module only reads and writes
the value; the stores keep it and `laterite_django.resumable` fills it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

__all__ = ["Checkpoint", "CursorSender", "Iteration"]


class CursorSender(Protocol):
    """A store's way to save one claim's `cx.iterate` cursors without waiting between
    chunks (Store.cursor_sender): `send` starts a save on a connection of its own and
    gives the function that waits for its answer (True: saved, the claim held; it may
    raise, and the save is then made the usual way); one answer is waited for before the
    next save is sent. `close` ends it once the loop is over."""

    def send(self, text: str) -> Callable[[], bool]: ...

    def close(self) -> None: ...


@dataclass(slots=True)
class Iteration:
    """Where one `cx.iterate` loop of the job stands: the cursor after the last chunk
    saved (None before the first), how many items those chunks held, and whether the
    loop reached its end (a later run then skips it)."""

    cursor: Any = None
    done: int = 0
    finished: bool = False


@dataclass(slots=True)
class Checkpoint:
    """Everything a job saved across its runs; empty for most jobs."""

    iterations: list[Iteration] = field(default_factory=list)
    steps: dict[str, Any] = field(default_factory=dict)  # name -> the block's result
    snoozes: int = 0

    @classmethod
    def parse(cls, text: str | None) -> Checkpoint:
        """The checkpoint stored as `text` ("" or None: an empty one). A text that is
        not a checkpoint (written by hand, damaged) raises ValueError naming it."""
        if not text:
            return cls()
        try:
            data = json.loads(text)
            iterations = [Iteration(cursor=i.get("cursor"), done=int(i.get("done", 0)),
                                    finished=bool(i.get("finished", False)))
                          for i in data.get("iterations", ())]
            steps = dict(data.get("steps", {}))
            snoozes = int(data.get("snoozes", 0))
        except (TypeError, ValueError, AttributeError) as e:
            raise ValueError(f"not a job checkpoint: {text[:200]!r} ({e})") from e
        return cls(iterations=iterations, steps=steps, snoozes=snoozes)

    def dump(self) -> str:
        """The JSON text the stores keep ("" when there is nothing to keep)."""
        data: dict[str, Any] = {}
        if self.iterations:
            data["iterations"] = [
                {"cursor": i.cursor, "done": i.done, **({"finished": True} if i.finished else {})}
                for i in self.iterations]
        if self.steps:
            data["steps"] = self.steps
        if self.snoozes:
            data["snoozes"] = self.snoozes
        return json.dumps(data, separators=(",", ":")) if data else ""

    def iteration(self, index: int) -> Iteration:
        """The `index`-th loop's place (the job's loops are counted in the order they
        start within a run), added empty if this is its first run."""
        while len(self.iterations) <= index:
            self.iterations.append(Iteration())
        return self.iterations[index]

    def describe(self) -> str:
        """For people (the admin, `queue_status`): "12,500 items done, at 12500; steps
        charge, email; snoozed 2 times"."""
        parts = []
        for i in self.iterations:
            where = "finished" if i.finished else f"at {json.dumps(i.cursor)}"
            parts.append(f"{i.done:,} items done, {where}")
        if self.steps:
            parts.append("steps done: " + ", ".join(self.steps))
        if self.snoozes:
            parts.append(f"snoozed {self.snoozes} time{'s' if self.snoozes != 1 else ''}")
        return "; ".join(parts)
