"""The checks a push makes before storing a job: name, queue, registration, arguments, options."""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from django.utils import timezone

from .core.binding import mismatch
from .core.sizes import (
    MAX_DELAY,
    NAME_MAX,
    PRIORITY_MAX,
    PRIORITY_MIN,
    QUEUE_MAX,
    UNIQUE_KEY_MAX,
    unfit,
)
from .exceptions import JobNotRegistered
from .registry import registry

__all__ = ["DEBOUNCE_NAMES", "Call", "Debounce", "PushChecks", "checked_key", "debounce_seconds",
           "priority_problem", "split_debounce"]

Call = tuple | list | Mapping[str, Any]

# The keyword arguments a push reads as its own (a debounced push), never the job's: a
# job function may not take a parameter of these names (definition.check_options).
DEBOUNCE_NAMES = frozenset({"debounce", "debounce_max", "debounce_key"})


@dataclass(frozen=True, slots=True)
class Debounce:
    """How one push debounces: due `seconds` after the last push of `key`, but never
    later than `longest` seconds after the first (None: no such deadline)."""

    seconds: float
    longest: float | None
    key: str


class PushChecks:
    """The push-time checks of JobFunction, a base class so each is one direct method call."""

    if TYPE_CHECKING:
        name: str
        qualified_function: str
        retry_until: timedelta | Callable[..., datetime] | None
        unique_key: Callable[..., str | None] | None
        debounce: float | timedelta | None
        debounce_max: float | timedelta | None
        debounce_key: Callable[..., str] | None
        _call_signature: inspect.Signature
        _good_shapes: set[tuple | int]

    def _check_name_and_queue(self, queue: Any) -> None:
        """Refuse a name or queue that is empty, longer than its column, or holding a
        character no store keeps (a NUL, a lone surrogate)."""
        name = self.name
        if not isinstance(name, str) or not name:
            raise ValueError(f"A job name must be a non-empty string, got {name!r}.")
        problem = unfit("job name", name, NAME_MAX)
        if problem:
            raise ValueError(f"The {problem}.")
        if not isinstance(queue, str) or not queue:
            raise ValueError(f"Job {name!r}: queue must be a non-empty string, got {queue!r}.")
        problem = unfit("queue", queue, QUEUE_MAX)
        if problem:
            raise ValueError(f"Job {name!r}: {problem}.")

    def _check_registered(self) -> None:
        """Refuse a push no worker could run: this job is not what its name is registered to."""
        found = registry.find(self.name)
        if found is self:
            return
        if found is None:
            raise JobNotRegistered(
                f"Job {self.name!r} is not registered, so no worker can run it: make it with "
                f"@job, or register it with laterite_django.registry.register()."
            )
        # Re-importing its module (autoreload) registers a new object for the same function.
        if found.qualified_function != self.qualified_function:
            raise JobNotRegistered(
                f"Job {self.name!r} ({self.qualified_function}) is not registered: that name "
                f"now belongs to {found.qualified_function}."
            )

    def _after(self, delay: timedelta | float) -> datetime:
        """The moment `delay` (a timedelta or seconds) from now, or raise naming a delay
        that is not one, or is negative, not finite or beyond MAX_DELAY."""
        return timezone.now() + timedelta(seconds=self._seconds(delay))

    def _seconds(self, delay: timedelta | float) -> float:
        """`delay` (a timedelta or seconds) in seconds, or raise naming a delay that is
        not one, or is negative, not finite or beyond MAX_DELAY."""
        if isinstance(delay, timedelta):
            seconds = delay.total_seconds()
        elif isinstance(delay, int | float) and not isinstance(delay, bool):
            seconds = delay
        else:
            raise TypeError(
                f"Job {self.name!r}: push_in needs seconds (a number) or a timedelta, got "
                f"{delay!r}."
            )
        if not (0 <= seconds <= MAX_DELAY):  # NaN compares false too
            raise ValueError(
                f"Job {self.name!r}: push_in needs a delay of 0 to {MAX_DELAY:.0f} s (10 "
                f"years), got {delay!r}."
            )
        return float(seconds)

    def _checked_when(self, when: datetime) -> datetime:
        """`when` if it is an aware datetime within MAX_DELAY of now, else raise naming it."""
        if not isinstance(when, datetime) or timezone.is_naive(when):
            raise ValueError(
                f"Job {self.name!r}: push_at needs an aware datetime, got {when!r}."
            )
        try:
            seconds = (when - timezone.now()).total_seconds()
        except OverflowError:
            seconds = math.inf
        if abs(seconds) > MAX_DELAY:
            raise ValueError(
                f"Job {self.name!r}: push_at needs a moment within 10 years of now, got "
                f"{when!r}."
            )
        return when

    def _check_priority(self, priority: Any) -> None:
        """Refuse a priority that is not an int, or outside the smallint column (the
        same range on every store)."""
        problem = priority_problem(priority)
        if problem:
            kind = TypeError if isinstance(priority, bool) or not isinstance(priority, int) else (
                ValueError)
            raise kind(f"Job {self.name!r}: {problem}.")

    def _pairs(self, calls: Iterable[Call]) -> list[tuple[Sequence[Any], Mapping[str, Any]]]:
        pairs: list[tuple[Sequence[Any], Mapping[str, Any]]] = []
        for index, call in enumerate(calls):
            if isinstance(call, Mapping):
                pairs.append(((), dict(call)))
            elif isinstance(call, tuple | list):
                pairs.append((tuple(call), {}))
            else:
                raise TypeError(
                    f"Job {self.name!r}: push_many entry {index} must be an args tuple or a "
                    f"kwargs dict, got {type(call).__name__}: {call!r:.80}"
                )
        return pairs

    def _check_arguments(self, args: Sequence[Any], kwargs: Mapping[str, Any]) -> None:
        # Whether a call binds depends only on its shape: check each shape once (the
        # shape of a call without keywords is its number of arguments).
        shape = (len(args), *sorted(kwargs)) if kwargs else len(args)
        if shape in self._good_shapes:
            return
        try:
            self._call_signature.bind(*args, **kwargs)
            if len(self._good_shapes) < 64:
                self._good_shapes.add(shape)
        except TypeError as e:
            why = mismatch(self._call_signature, args, kwargs) or str(e)
            raise TypeError(
                f"Job {self.name!r} cannot be called with these arguments: {why}."
            ) from e

    def _retry_until(
        self, now: datetime, args: Sequence[Any], kwargs: Mapping[str, Any]
    ) -> datetime | None:
        if self.retry_until is None:
            return None
        if isinstance(self.retry_until, timedelta):
            return now + self.retry_until
        value = self.retry_until(*args, **kwargs)
        if value is None:
            return None
        if not isinstance(value, datetime) or timezone.is_naive(value):
            raise ValueError(
                f"Job {self.name!r}: retry_until returned {value!r}; it must return an aware "
                f"datetime or None."
            )
        return value

    def _unique_key(self, args: Sequence[Any], kwargs: Mapping[str, Any]) -> str | None:
        if self.unique_key is None:
            return None
        key = self.unique_key(*args, **kwargs)
        if key is not None:
            checked_key(self.name, "the unique_key", key,
                        f"unique_key returned {key!r}; it must return a str or None.")
        return key

    def _debounce_of(self, args: Sequence[Any], kwargs: Mapping[str, Any],
                     given: Mapping[str, Any] | None) -> Debounce | None:
        """How a call is debounced: by the push's own `debounce`, `debounce_max` and
        `debounce_key` (`given`, None if it names none) over the job's options; None if
        it is not. Raise naming a value that is not one, or a set that does not go
        together (a max without a debounce, a debounce without a key, or with the job's
        unique_key: the two share one namespace and a push either drops or replaces)."""
        name = self.name
        given = given or {}
        seconds = given.get("debounce")
        longest = given.get("debounce_max")
        key = given.get("debounce_key")
        # Each option the push does not give is the job's.
        if seconds is None:
            seconds = self.debounce
        if longest is None:
            longest = self.debounce_max
        if seconds is None:
            if longest is not None or key is not None:
                raise ValueError(
                    f"Job {name!r}: debounce_max and debounce_key go with debounce=S (seconds); "
                    f"got debounce_max={longest!r}, debounce_key={key!r} without it.")
            return None
        wait = debounce_seconds(name, "debounce", seconds)
        most = None if longest is None else debounce_seconds(name, "debounce_max", longest)
        if most is not None and most < wait:
            raise ValueError(
                f"Job {name!r}: debounce_max ({longest!r}) must be at least debounce "
                f"({seconds!r}).")
        if self.unique_key is not None:
            raise ValueError(
                f"Job {name!r} has a unique_key and is pushed with debounce: a push either "
                f"drops itself (unique_key) or replaces the waiting job (debounce_key), "
                f"and the two keys share one namespace; use one of them.")
        if key is None and self.debounce_key is not None:
            key = self.debounce_key(*args, **kwargs)
        if key is None:
            raise ValueError(
                f"Job {name!r}: debounce needs a key, the push's debounce_key=... or the "
                f"job's @job(debounce_key=callable); got none.")
        checked_key(name, "the debounce_key", key, f"debounce_key must be a str, got {key!r}.")
        return Debounce(wait, most, key)


def checked_key(job_name: str, label: str, key: Any, not_text: str) -> str:
    """`key`, a key a job computed or a push gave (unique, debounce, concurrency, fair),
    once it is a str that fits the key column; else TypeError (saying `not_text`) or
    ValueError naming the job."""
    if not isinstance(key, str):
        raise TypeError(f"Job {job_name!r}: {not_text}")
    problem = unfit(label, key, UNIQUE_KEY_MAX)
    if problem:
        raise ValueError(f"Job {job_name!r}: {problem}.")
    return key


def split_debounce(kwargs: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """A push's keyword arguments split in two: the job's, and the push's own debounce
    options (DEBOUNCE_NAMES)."""
    given = {name: kwargs[name] for name in DEBOUNCE_NAMES if name in kwargs}
    return {name: value for name, value in kwargs.items() if name not in given}, given


def debounce_seconds(name: str, option: str, value: Any) -> float:
    """`value` of option `option` (debounce, debounce_max) in seconds: a number or a
    timedelta above 0 and within MAX_DELAY; else raise naming it."""
    if isinstance(value, timedelta):
        seconds = value.total_seconds()
    elif isinstance(value, int | float) and not isinstance(value, bool):
        seconds = float(value)
    else:
        raise TypeError(
            f"Job {name!r}: {option} must be seconds (a number) or a timedelta, got "
            f"{value!r}.")
    if not (0 < seconds <= MAX_DELAY):  # NaN compares false too
        raise ValueError(
            f"Job {name!r}: {option} must be more than 0 seconds and at most "
            f"{MAX_DELAY:.0f} (10 years), got {value!r}.")
    return float(seconds)


def priority_problem(priority: Any) -> str | None:
    """Say why `priority` is not one every store keeps (an int that fits PostgreSQL's
    smallint), or return None."""
    if (isinstance(priority, int) and not isinstance(priority, bool)
            and PRIORITY_MIN <= priority <= PRIORITY_MAX):
        return None
    return (f"priority must be an integer from {PRIORITY_MIN} to {PRIORITY_MAX}, got "
            f"{priority!r}")
