"""The backend's OPTIONS (TRIES, BACKOFF, TIMEOUT, RESULT_TTL, CONCURRENCY): defaults, checks."""

from __future__ import annotations

from numbers import Real
from typing import Any

from ..core.backoff import validate_backoff
from .limits import concurrency_problem

__all__ = ["DEFAULT_OPTIONS", "option_problem"]

DEFAULT_OPTIONS: dict[str, Any] = {
    "TRIES": 3,
    "BACKOFF": None,  # laterite's default: 10 s doubling, capped at 2560 s
    "TIMEOUT": 60,
    "RESULT_TTL": 7 * 24 * 3600,
    "CONCURRENCY": None,  # at most N of each task running at once; None = no limit
}


def _is_whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_seconds(value: Any) -> bool:
    return isinstance(value, Real) and not isinstance(value, bool) and float(value) > 0


def option_problem(name: str, value: Any) -> str | None:
    """Say what is wrong with a value of option `name` ("TRIES", ...), or return None."""
    if name == "TRIES" and not (_is_whole(value) and value >= 0):
        return f"must be an integer >= 0 (0 = retry without end), got {value!r}"
    if name == "TIMEOUT" and not (value is None or _is_seconds(value)):
        return f"must be seconds > 0 or None (no limit), got {value!r}"
    if name == "RESULT_TTL" and not (value is None or _is_seconds(value)):
        return f"must be seconds > 0 or None (kept for good), got {value!r}"
    if name == "CONCURRENCY":
        return concurrency_problem(value)
    if name == "BACKOFF":
        try:
            validate_backoff("backoff", value)
        except (TypeError, ValueError) as e:
            text = str(e).removeprefix("Job 'backoff': ").rstrip(".")
            return text.removeprefix("backoff ") if text.startswith("backoff ") else (
                f"is wrong: {text}"
            )
    return None
