"""A running job's progress: `cx.progress(done, total=None, note="")`.

The job's call only records the latest value in memory (`ProgressDesk.report`) and,
the first time since the last write, wakes the worker's heartbeat thread; that
thread writes it to the store (`Store.save_progress`), at most once a second per
job. A slow store therefore slows the heartbeat thread, never the job.

The stored text is JSON and carries the claim's token: a value written during an
earlier attempt (the job since retried, or returned to its queue) no longer
matches the job's claim, and is not shown (`Progress.parse`). Nothing else has to
clear it.
"""

from __future__ import annotations

import json
import math
import threading
import time
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from django.utils import timezone

if TYPE_CHECKING:
    from .values import Claim

__all__ = ["EVERY", "NOTE_MAX", "Progress", "ProgressDesk", "check"]

# The least time between two writes of one job's progress.
EVERY = 1.0
# A note longer than this is cut.
NOTE_MAX = 200


@dataclass(frozen=True, slots=True)
class Progress:
    """How far a running job is: `done` of `total` (None: not known), and a note."""

    done: float
    total: float | None = None
    note: str = ""
    at: datetime | None = None  # when the job said so

    @property
    def fraction(self) -> float | None:
        """done / total between 0 and 1, or None without a total."""
        if not self.total:
            return None
        return min(max(self.done / self.total, 0.0), 1.0)

    def describe(self) -> str:
        """For people: "30/100 (30%) resizing images"."""
        done = _number(self.done)
        text = done if self.total is None else f"{done}/{_number(self.total)}"
        if self.fraction is not None:
            text += f" ({self.fraction:.0%})"
        return f"{text} {self.note}" if self.note else text

    def to_text(self, token: str) -> str:
        """The stored form, tied to the claim whose attempt reported it."""
        return json.dumps({"done": self.done, "total": self.total, "note": self.note,
                           "at": self.at.isoformat() if self.at else None, "token": token},
                          separators=(",", ":"), ensure_ascii=False)

    @classmethod
    def parse(cls, text: str | bytes | None, token: str | bytes | None) -> Progress | None:
        """The progress stored as `text` if it was reported under the claim `token`
        (the job's current one); None otherwise, or if it does not read."""
        if not text or not token:
            return None
        if isinstance(token, bytes):
            token = token.decode()
        try:
            data = json.loads(text)
            if data.get("token") != token:
                return None
            at = data.get("at")
            return cls(float(data["done"]),
                       None if data.get("total") is None else float(data["total"]),
                       str(data.get("note") or ""),
                       datetime.fromisoformat(at) if at else None)
        except (ValueError, TypeError, KeyError, AttributeError):
            return None


def _number(value: float) -> str:
    return f"{value:g}"


def check(done: object, total: object, note: object) -> Progress:
    """The Progress of a `cx.progress()` call, or a clear error for bad values."""
    for label, value in (("done", done), ("total", total)):
        if value is None and label == "total":
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(
                value):
            raise TypeError(f"cx.progress(): {label} must be a finite number, not {value!r}.")
    if not isinstance(note, str):
        raise TypeError(f"cx.progress(): note must be a str, not {type(note).__name__}.")
    return Progress(float(done), None if total is None else float(total),  # type: ignore[arg-type]
                    note[:NOTE_MAX], timezone.now())


class ProgressDesk:
    """The latest progress of each job a worker runs, until its heartbeat writes it.

    `report` is called from the job's thread; `due` and `wrote` from the heartbeat's.
    """

    def __init__(self, wake: threading.Event, every: float = EVERY) -> None:
        self.wake = wake
        self.every = every
        self._lock = threading.Lock()
        self._pending: dict[tuple[int, str], tuple[Claim, Progress]] = {}
        self._written: dict[tuple[int, str], float] = {}  # key -> when last written

    def report(self, claim: Claim, progress: Progress) -> None:
        key = (claim.id, claim.token)
        with self._lock:
            first = not self._pending
            self._pending[key] = (claim, progress)
        if first:
            self.wake.set()

    def wait(self) -> float | None:
        """Seconds until a pending progress may be written (0: now); None: none pending."""
        with self._lock:
            if not self._pending:
                return None
            now = time.monotonic()
            return max(0.0, min(self._written.get(key, 0.0) + self.every - now
                                for key in self._pending))

    def due(self) -> list[tuple[Claim, str]]:
        """Take the progress that may be written now, as (claim, stored text)."""
        now = time.monotonic()
        taken = []
        with self._lock:
            for key, (claim, progress) in list(self._pending.items()):
                if self._written.get(key, 0.0) + self.every <= now:
                    del self._pending[key]
                    self._written[key] = now
                    taken.append((claim, progress.to_text(claim.token)))
        return taken

    def forget(self, claim: Claim) -> None:
        """The attempt is over: drop what it had not written yet."""
        if not self._pending and not self._written:
            return  # the job said nothing: no lock taken
        key = (claim.id, claim.token)
        with self._lock:
            self._pending.pop(key, None)
            self._written.pop(key, None)
