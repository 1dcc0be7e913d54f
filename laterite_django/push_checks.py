"""The checks a push makes before storing a job: name, queue, registration, arguments, options."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from django.utils import timezone

from .binding import mismatch
from .exceptions import JobNotRegistered
from .limits import NAME_MAX, QUEUE_MAX, UNIQUE_KEY_MAX, too_long
from .registry import registry

__all__ = ["Call", "PushChecks"]

Call = tuple | list | Mapping[str, Any]


class PushChecks:
    """The push-time checks of JobFunction, a base class so each is one direct method call."""

    if TYPE_CHECKING:
        name: str
        qualified_function: str
        retry_until: timedelta | Callable[..., datetime] | None
        unique_key: Callable[..., str | None] | None
        _call_signature: inspect.Signature
        _good_shapes: set[tuple | int]

    def _check_name_and_queue(self, queue: Any) -> None:
        """Refuse a name or queue that is empty, or longer than its column."""
        name = self.name
        if not isinstance(name, str) or not name:
            raise ValueError(f"A job name must be a non-empty string, got {name!r}.")
        problem = too_long("job name", name, NAME_MAX)
        if problem:
            raise ValueError(f"The {problem}.")
        if not isinstance(queue, str) or not queue:
            raise ValueError(f"Job {name!r}: queue must be a non-empty string, got {queue!r}.")
        problem = too_long("queue", queue, QUEUE_MAX)
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

    @staticmethod
    def _after(delay: timedelta | float) -> datetime:
        if not isinstance(delay, timedelta):
            delay = timedelta(seconds=delay)
        return timezone.now() + delay

    def _checked_when(self, when: datetime) -> datetime:
        if not isinstance(when, datetime) or timezone.is_naive(when):
            raise ValueError(
                f"Job {self.name!r}: push_at needs an aware datetime, got {when!r}."
            )
        return when

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
        if key is not None and not isinstance(key, str):
            raise TypeError(
                f"Job {self.name!r}: unique_key returned {key!r}; it must return a str or None."
            )
        problem = key and too_long("the unique_key", key, UNIQUE_KEY_MAX)
        if problem:
            raise ValueError(f"Job {self.name!r}: {problem}.")
        return key
