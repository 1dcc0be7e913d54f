"""Job history (LATERITE_QUEUE_HISTORY): which queues' finished jobs leave a record, and
for how long it is kept.

    LATERITE_QUEUE_HISTORY = {"keep": "7d"}                        # every queue, 7 days
    LATERITE_QUEUE_HISTORY = {"keep": "7d", "queues": {"mail": "1d", "bulk": None}}
    LATERITE_QUEUE_HISTORY = {"queues": {"mail": "1d"}}            # only queue "mail"

A duration is seconds (a number > 0) or a text such as "90s", "30m", "12h", "7d". A
queue named with None keeps no history. Off (None, the default): nothing is recorded
and the settle of a job costs one test of this setting.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .cancel import CANCELLED

__all__ = ["CANCELLED_STATUS", "ERROR_CHARS", "FAILED", "KEEP_FIRST", "KEEP_LAST", "STATUSES",
           "SUCCEEDED", "HistoryPolicy", "attempt_entry", "attempt_error", "capped",
           "duration", "full_log", "history_problem", "policy_of", "status_of"]

SUCCEEDED = "succeeded"
FAILED = "failed"
CANCELLED_STATUS = "cancelled"
STATUSES = (SUCCEEDED, FAILED, CANCELLED_STATUS)

# The attempts a job's row keeps while it is retried (its `attempt_log`), for its record:
# the first KEEP_FIRST and the last KEEP_LAST, so that a job retried a thousand times
# keeps a row of bounded size (each entry says its attempt's number: a gap shows). Its
# record adds the last attempt: at most KEEP_FIRST + KEEP_LAST + 1 entries.
KEEP_FIRST = 3
KEEP_LAST = 7
# An attempt's error text is cut to its first ERROR_CHARS characters in the log (the
# record's own `error` keeps the last attempt's whole).
ERROR_CHARS = 2000

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhd])\s*$")


def duration(value: Any) -> float | None:
    """Seconds of a duration (a number > 0, or "<n>s|m|h|d"); None if it is not one."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value) if math.isfinite(value) and value > 0 else None
    if isinstance(value, str):
        found = _DURATION.match(value)
        if found:
            seconds = float(found.group(1)) * _UNITS[found.group(2)]
            return seconds if seconds > 0 else None
    return None


def history_problem(value: Any) -> str | None:
    """Say what is wrong with a LATERITE_QUEUE_HISTORY value, naming it; None if good."""
    if value is None:
        return None
    shape = ("it must be None or a dict {'keep': duration, 'queues': {queue: duration or "
             "None}} (a duration: seconds > 0 or '90s', '30m', '12h', '7d')")
    if not isinstance(value, Mapping):
        return shape
    unknown = set(value) - {"keep", "queues"}
    if unknown:
        return f"{shape}; {', '.join(map(repr, sorted(unknown, key=str)))} is not a key it takes"
    if "keep" in value and value["keep"] is not None and duration(value["keep"]) is None:
        return f"{shape}; 'keep' is {value['keep']!r}"
    queues = value.get("queues", {})
    if not isinstance(queues, Mapping):
        return f"{shape}; 'queues' is {queues!r}"
    for queue, keep in queues.items():
        if not isinstance(queue, str) or not queue:
            return f"{shape}; {queue!r} is not a queue name"
        if keep is not None and duration(keep) is None:
            return f"{shape}; the keep of queue {queue!r} is {keep!r}"
    return None


@dataclass(frozen=True)
class HistoryPolicy:
    """A checked LATERITE_QUEUE_HISTORY: how long each queue's records are kept."""

    keep: float | None  # seconds, for queues not named; None: those keep no history
    queues: dict[str, float | None] = field(default_factory=dict)

    def keep_of(self, queue: str) -> float | None:
        """Seconds `queue`'s records are kept; None if it keeps none."""
        return self.queues.get(queue, self.keep) if self.queues else self.keep

    def records(self, queue: str) -> bool:
        """Whether a finished job of `queue` leaves a record."""
        return self.keep_of(queue) is not None

    @property
    def longest(self) -> float:
        """The longest any queue keeps its records (what outlives every queue's keep)."""
        keeps = [k for k in (self.keep, *self.queues.values()) if k is not None]
        return max(keeps, default=0.0)

    def recorded_queues(self) -> tuple[bool, list[str]]:
        """Which queues keep history, for a store to test a job's queue where it cannot
        call `records` (SQL, Lua): (True, the queues excluded) when every queue not named
        keeps it, else (False, the queues included)."""
        if self.keep is not None:
            return True, [q for q, keep in self.queues.items() if keep is None]
        return False, [q for q, keep in self.queues.items() if keep is not None]

    def shorter(self) -> dict[str, float]:
        """The queues named with a keep shorter than `longest`: pruned one by one."""
        longest = self.longest
        return {q: k for q, k in self.queues.items() if k is not None and k < longest}


def policy_of(value: Any) -> HistoryPolicy | None:
    """The policy of a checked LATERITE_QUEUE_HISTORY value; None when it records nothing."""
    if not value:
        return None
    queues = {q: (None if k is None else duration(k)) for q, k in
              (value.get("queues") or {}).items()}
    keep = value.get("keep")
    made = HistoryPolicy(None if keep is None else duration(keep), queues)
    if made.keep is None and not any(k is not None for k in queues.values()):
        return None
    return made


def status_of(error: str) -> str:
    """The status of a job that left for the failed list with `error`: cancelled or
    failed (a cancelled job's error starts with core.cancel.CANCELLED)."""
    return CANCELLED_STATUS if error.startswith(f"{CANCELLED}:") else FAILED


def attempt_error(error: str) -> str:
    """An attempt's error as its log keeps it: cut to ERROR_CHARS characters."""
    return error if len(error) <= ERROR_CHARS else error[: ERROR_CHARS - 1] + "\u2026"


def attempt_entry(attempt: int, started: float | None, ended: float | None, worker: str,
                  error: str) -> dict[str, Any]:
    """One entry of an attempt log: its number, start and end (epoch seconds by its
    worker's clock, None if not known), its worker (host:pid) and its error ("")."""
    return {"attempt": attempt, "started": started or None, "ended": ended or None,
            "worker": worker, "error": attempt_error(error)}


def capped(log: list[Any]) -> list[Any]:
    """`log` cut to its first KEEP_FIRST and last KEEP_LAST entries (the stores' SQL and
    Lua cut the same way, one entry at a time as they append)."""
    if len(log) <= KEEP_FIRST + KEEP_LAST:
        return log
    return log[:KEEP_FIRST] + log[-KEEP_LAST:]


def full_log(earlier: Any, last: dict[str, Any] | None) -> list[dict[str, Any]] | None:
    """A record's attempt log: the attempts its job's row kept (`earlier`, a list or its
    JSON text; None or "" for none) and its last attempt (None: a job cancelled while it
    waited has none); None when the last was its only one (the record's own columns say
    all of it)."""
    if isinstance(earlier, str | bytes):
        try:
            earlier = json.loads(earlier) if earlier else None
        except ValueError:
            earlier = None
    if not isinstance(earlier, list) or not earlier:
        return None
    return [*capped(earlier), last] if last is not None else capped(earlier)
