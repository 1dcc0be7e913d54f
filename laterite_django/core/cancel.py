"""A cancelled job's outcome and the error it carries on the failed list (flow/cancel.py
says how a running job learns of its cancel)."""

from __future__ import annotations

__all__ = ["CANCELLED", "Outcome", "reason"]

# The first word of a cancelled job's error on the failed list.
CANCELLED = "Cancelled"


class Outcome:
    """What a cancel did to one job."""

    CANCELLED = "cancelled"  # it was waiting or delayed: on the failed list now
    ASKED = "asked"  # it runs: told now, interrupted after the grace
    FINISHED = "finished"  # no such job waits or runs (finished, or never was)


def reason(running: bool) -> str:
    """The error a cancelled job carries on the failed list."""
    return f"{CANCELLED}: {'while it ran' if running else 'before it ran'}"
