"""How long a job waits before its next attempt."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from numbers import Real
from typing import cast

__all__ = ["DEFAULT_BACKOFF", "Backoff", "Growing", "delay_after", "validate_backoff"]

Backoff = float | int | Sequence[float] | Callable[[int], float] | None


def DEFAULT_BACKOFF(attempt: int) -> float:
    """10 s after the first attempt, doubling, capped at 2560 s."""
    return float(min(10 * 2 ** (attempt - 1), 2560))


def validate_backoff(job_name: str, backoff: Backoff) -> None:
    """Raise TypeError/ValueError naming the job if `backoff` is not a valid backoff."""
    if backoff is None or callable(backoff):
        return
    if isinstance(backoff, bool):
        raise TypeError(f"Job {job_name!r}: backoff must be seconds, got {backoff!r}.")
    if isinstance(backoff, Real):
        if backoff < 0:
            raise ValueError(f"Job {job_name!r}: backoff must be >= 0, got {backoff!r}.")
        return
    if isinstance(backoff, Sequence) and not isinstance(backoff, str):
        if not backoff:
            raise ValueError(f"Job {job_name!r}: a backoff list cannot be empty.")
        for value in backoff:
            if isinstance(value, bool) or not isinstance(value, Real) or value < 0:
                raise ValueError(
                    f"Job {job_name!r}: backoff list entries must be seconds >= 0, "
                    f"got {value!r}."
                )
        return
    raise TypeError(
        f"Job {job_name!r}: backoff must be a number, a list of numbers or "
        f"callable(attempt) -> seconds, got {backoff!r}."
    )


def delay_after(backoff: Backoff, attempt: int) -> float:
    """Return the seconds to wait after failed attempt number `attempt` (from 1).

    A callable's answer is returned as it is, unconverted: the rule book refuses one
    that is not a finite number of seconds >= 0, as it refuses such a Retry delay
    (a float() here would take "5" or True for seconds, and NaN for none)."""
    if backoff is None:
        return DEFAULT_BACKOFF(attempt)
    if callable(backoff):
        return backoff(attempt)
    if isinstance(backoff, Real):
        return float(backoff)
    steps = cast(Sequence[float], backoff)
    return float(steps[min(attempt, len(steps)) - 1])


class Growing:
    """Waits that double from `start` up to `cap`: the worker's own retries of a store
    that is down, and the supervisor's restarts of a worker that keeps crashing."""

    def __init__(self, start: float, *, cap: float) -> None:
        self.start = start
        self.cap = cap
        self._next = start

    def next(self) -> float:
        """Return the next wait, and double the one after it."""
        wait = self._next
        self._next = min(self._next * 2, self.cap)
        return wait

    def reset(self) -> None:
        self._next = self.start
