"""The options of a job definition (`@job(...)`): each checked once, at definition."""

from __future__ import annotations

from datetime import timedelta
from numbers import Real
from typing import TYPE_CHECKING

from .core.backoff import validate_backoff
from .core.sequences import ON_FAILURE
from .push_checks import DEBOUNCE_NAMES, debounce_seconds, priority_problem

if TYPE_CHECKING:
    from .jobs import JobFunction

__all__ = ["check_options"]


def check_options(job: JobFunction) -> None:
    """Refuse a job's options that no worker could apply, naming the job and the value."""
    label = f"Job {job.name!r}"
    if isinstance(job.tries, bool) or not isinstance(job.tries, int) or job.tries < 0:
        raise ValueError(f"{label}: tries must be an integer >= 0, got {job.tries!r}.")
    timeout = job.timeout
    if timeout is not None and (
        isinstance(timeout, bool) or not isinstance(timeout, Real) or timeout <= 0
    ):
        raise ValueError(f"{label}: timeout must be seconds > 0 or None, got {job.timeout!r}.")
    snoozes = job.max_snoozes
    if isinstance(snoozes, bool) or not isinstance(snoozes, int) or snoozes < 0:
        raise ValueError(f"{label}: max_snoozes must be an integer >= 0 (0: no ceiling), "
                         f"got {snoozes!r}.")
    validate_backoff(job.name, job.backoff)
    if job.retry_until is not None and not (
        isinstance(job.retry_until, timedelta) or callable(job.retry_until)
    ):
        raise TypeError(
            f"{label}: retry_until must be a timedelta or callable(*args, **kwargs) -> "
            f"datetime, got {job.retry_until!r}."
        )
    if job.unique_key is not None and not callable(job.unique_key):
        raise TypeError(
            f"{label}: unique_key must be callable(*args, **kwargs) -> str or None, "
            f"got {job.unique_key!r}."
        )
    _check_debounce(job, label)
    if job.fair_key is not None and not callable(job.fair_key):
        raise TypeError(
            f"{label}: fair_key must be callable(*args, **kwargs) -> str or None, got "
            f"{job.fair_key!r}.")
    _check_sequence(job, label)
    if isinstance(job.priority, bool) or not isinstance(job.priority, int):
        raise TypeError(f"{label}: priority must be an integer, got {job.priority!r}.")
    problem = priority_problem(job.priority)
    if problem:
        raise ValueError(f"{label}: {problem}.")
    concurrency = job.concurrency
    if concurrency is not None and (
        isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1
    ):
        raise ValueError(
            f"{label}: concurrency must be an integer >= 1 or None, got {concurrency!r}.")
    if job.concurrency_key is not None and (concurrency is None or not callable(
            job.concurrency_key)):
        raise TypeError(
            f"{label}: concurrency_key must be callable(*args, **kwargs) -> str or None, "
            f"and goes with concurrency=N; got {job.concurrency_key!r}."
        )


def _check_sequence(job: JobFunction, label: str) -> None:
    """Refuse a sequence that is not a callable, a sequence_on_failure that is not one of
    ON_FAILURE, and a sequence with a debounce (replaced in place, not run in order)."""
    if job.sequence is not None and not callable(job.sequence):
        raise TypeError(
            f"{label}: sequence must be callable(*args, **kwargs) -> str or None, got "
            f"{job.sequence!r}.")
    if not isinstance(job.sequence_on_failure, str) or job.sequence_on_failure not in ON_FAILURE:
        raise ValueError(
            f"{label}: sequence_on_failure must be 'wait' or 'continue', got "
            f"{job.sequence_on_failure!r}.")
    if job.sequence is not None and job.debounce is not None:
        raise TypeError(
            f"{label}: a job of a sequence cannot be debounced (a debounced job is "
            f"replaced in place, a sequence's jobs run in push order); drop debounce or "
            f"sequence.")


def _check_debounce(job: JobFunction, label: str) -> None:
    """Refuse a function with a parameter a push keeps for itself, and debounce options
    that do not go together (see PushChecks._debounce_of for the same at a push)."""
    for parameter in job._call_signature.parameters:
        if parameter in DEBOUNCE_NAMES:
            raise TypeError(
                f"{label}: its function has a parameter named {parameter!r}, a name push() "
                f"keeps for its own debounce options (debounce, debounce_max, "
                f"debounce_key); rename the parameter.")
    if job.debounce is None:
        if job.debounce_max is not None or job.debounce_key is not None:
            raise ValueError(
                f"{label}: debounce_max and debounce_key go with debounce=S (seconds); got "
                f"debounce_max={job.debounce_max!r}, debounce_key={job.debounce_key!r}.")
        return
    seconds = debounce_seconds(job.name, "debounce", job.debounce)
    if job.debounce_max is not None and debounce_seconds(
            job.name, "debounce_max", job.debounce_max) < seconds:
        raise ValueError(f"{label}: debounce_max ({job.debounce_max!r}) must be at least "
                         f"debounce ({job.debounce!r}).")
    # Without a debounce_key here, each push must give its own (debounce_key=...).
    if job.debounce_key is not None and not callable(job.debounce_key):
        raise TypeError(
            f"{label}: debounce_key must be callable(*args, **kwargs) -> str, got "
            f"{job.debounce_key!r}.")
    if job.unique_key is not None:
        raise ValueError(
            f"{label}: unique_key and debounce do not go together: a push either drops "
            f"itself (unique_key) or replaces the waiting job (debounce_key), and the two "
            f"keys share one namespace; use one of them.")
    if job.schedule is not None:
        raise ValueError(f"{label}: a scheduled job cannot debounce (schedule and debounce).")
