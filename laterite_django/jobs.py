"""The @job decorator and the job object it returns: push, push_in, push_at, push_many."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from functools import update_wrapper
from typing import TYPE_CHECKING, Any, Generic, ParamSpec, TypeVar

from django.db import transaction
from django.utils import timezone

from . import capture, inline, payload, tracing
from .async_push import AsyncPushes, refuse_event_loop
from .backoff import Backoff
from .binding import mismatch
from .conf import settings, validate_all
from .context import Pushed
from .definition import check_options
from .exceptions import JobNotRegistered
from .flow.limits import job_concurrency_key
from .limits import NAME_MAX, QUEUE_MAX, UNIQUE_KEY_MAX, too_long
from .registry import registry

if TYPE_CHECKING:
    from .stores import Claim, NewJob
    from .worker.rules import Decision, JobOptions

__all__ = ["JobFunction", "job"]

P = ParamSpec("P")
R = TypeVar("R")

Call = tuple | list | Mapping[str, Any]


class JobFunction(AsyncPushes[P, R], Generic[P, R]):
    """A function registered as a job; call it directly or push it to run later."""

    def __init__(
        self,
        func: Callable[..., R],
        *,
        name: str | None = None,
        queue: str = "default",
        tries: int = 3,
        backoff: Backoff = None,
        timeout: float | None = 60,
        retry_until: timedelta | Callable[..., datetime] | None = None,
        unique_key: Callable[..., str | None] | None = None,
        priority: int = 0,
        schedule: str | float | timedelta | None = None,
        concurrency: int | None = None,
        concurrency_key: Callable[..., str | None] | None = None,
    ) -> None:
        self.func = func
        self.qualified_function = f"{func.__module__}.{func.__qualname__}"
        self.name = name or self.qualified_function
        self.queue = queue
        self.tries = tries
        self.backoff = backoff
        self.timeout = timeout
        self._options: JobOptions | None = None  # options_for's, made again if these change
        self.retry_until = retry_until
        self.unique_key = unique_key
        self.priority = priority
        # A recurring schedule named after the job: a cron expression, or an interval
        # (seconds or a timedelta); checked with the other schedules (laterite.E02x).
        self.schedule = schedule
        # At most `concurrency` of its jobs run at once: per key, or per job name (flow/).
        self.concurrency = concurrency
        self.concurrency_key = concurrency_key
        self.is_async = inspect.iscoroutinefunction(func)
        signature = inspect.signature(func)
        self.takes_cx = "cx" in signature.parameters
        self._call_signature = signature.replace(
            parameters=[p for p in signature.parameters.values() if p.name != "cx"]
        )
        self._good_shapes: set[tuple] = set()
        self._check_name_and_queue(self.queue)
        check_options(self)
        update_wrapper(self, func)

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

    def __repr__(self) -> str:
        return f"<JobFunction {self.name} queue={self.queue!r}>"

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        """Run the function here and now, like the plain function."""
        return self.func(*args, **kwargs)

    # -- pushing --------------------------------------------------------------------

    def push(self, *args: P.args, **kwargs: P.kwargs) -> Pushed:
        """Store a call to run as soon as a worker is free."""
        return self.enqueue(args, kwargs)

    def push_in(self, delay: timedelta | float, /, *args: P.args, **kwargs: P.kwargs) -> Pushed:
        """Store a call to run after `delay` (a timedelta or seconds)."""
        return self.enqueue(args, kwargs, at=self._after(delay))

    def push_at(self, when: datetime, /, *args: P.args, **kwargs: P.kwargs) -> Pushed:
        """Store a call to run at `when`, an aware datetime."""
        return self.enqueue(args, kwargs, at=self._checked_when(when))

    def push_many(self, calls: Iterable[Call]) -> list[Pushed]:
        """Store many calls in one round trip: each an args tuple/list or a kwargs dict."""
        return self.enqueue_many(self._pairs(calls))

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

    def enqueue(
        self,
        args: Sequence[Any],
        kwargs: Mapping[str, Any],
        *,
        at: datetime | None = None,
        queue: str | None = None,
        priority: int | None = None,
    ) -> Pushed:
        """Push one call with explicit options; the other push methods end here."""
        return self.enqueue_many([(args, kwargs)], at=at, queue=queue, priority=priority)[0]

    def enqueue_many(
        self,
        calls: Sequence[tuple[Sequence[Any], Mapping[str, Any]]],
        *,
        at: datetime | None = None,
        queue: str | None = None,
        priority: int | None = None,
    ) -> list[Pushed]:
        """Push (args, kwargs) pairs; in inline mode run each now instead."""
        refuse_event_loop(self.name)
        new_jobs = self.new_jobs(calls, at=at, queue=queue, priority=priority)
        if capture.capturing():
            return capture.record(self, new_jobs)
        if settings.MODE == "inline":
            return [inline.run(self, new) for new in new_jobs]
        return self.store_jobs(new_jobs)

    def new_jobs(
        self,
        calls: Sequence[tuple[Sequence[Any], Mapping[str, Any]]],
        *,
        at: datetime | None = None,
        queue: str | None = None,
        priority: int | None = None,
    ) -> list[NewJob]:
        """Check and encode (args, kwargs) pairs as jobs to store; no I/O."""
        from .stores import NewJob

        self._check_registered()
        queue = self.queue if queue is None else queue
        self._check_name_and_queue(queue)
        now = timezone.now()
        new_jobs = []
        trace = tracing.carrier()  # the pusher's span, for the attempts' spans
        for args, kwargs in calls:
            self._check_arguments(args, kwargs)
            text = payload.encode(self.name, args, kwargs, trace)
            new_jobs.append(
                NewJob(
                    name=self.name,
                    queue=queue,
                    payload=text,
                    available_at=at or now,
                    pushed_at=now,
                    retry_until=self._retry_until(now, args, kwargs),
                    unique_key=self._unique_key(args, kwargs),
                    priority=self.priority if priority is None else priority,
                )
            )
            limited = self.concurrency_of(args, kwargs)
            if limited is not None:
                new_jobs[-1].concurrency_limit, new_jobs[-1].concurrency_key = limited
        return new_jobs

    def concurrency_of(self, args: Sequence[Any], kwargs: Mapping[str, Any]
                       ) -> tuple[int, str] | None:
        """(limit, key) of one call if it runs under a concurrency limit, else None.

        Asked at the push (and when a failed job is retried), so the key is stored
        with the job. The django.tasks job overrides it to read the Task's limit.
        """
        if self.concurrency is None:
            return None
        return self.concurrency, job_concurrency_key(self, args, kwargs)

    def store_jobs(self, new_jobs: Sequence[NewJob]) -> list[Pushed]:
        """Hand checked jobs to the store (after the commit if it cannot join the
        caller's transaction); start the worker threads in `worker` mode."""
        from .stores import get_store

        store = get_store()
        if settings.MODE == "worker":
            from .worker.threads import ensure_started

            validate_all()  # no system check ran under a WSGI server: refuse bad settings
            ensure_started()
        alias = settings.DATABASE
        if not store.transactional_push and transaction.get_connection(alias).in_atomic_block:
            # The store cannot join the caller's transaction: push once it commits.
            store.push_on_commit(new_jobs)
            return [Pushed("queued") for _ in new_jobs]
        ids = store.push(new_jobs)
        return [Pushed("duplicate") if i is None else Pushed("queued", i) for i in ids]

    def _check_arguments(self, args: Sequence[Any], kwargs: Mapping[str, Any]) -> None:
        # Whether a call binds depends only on its shape: check each shape once.
        shape = (len(args), *sorted(kwargs))
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

    def options_for(self, args: Sequence[Any], kwargs: Mapping[str, Any]) -> JobOptions:
        """The options the worker's rules apply to one call: this job's own.

        The django.tasks job overrides it to read the options of the Task it runs.
        """
        options = self._options
        if (options is None or options.tries != self.tries or options.backoff is not self.backoff
                or options.timeout != self.timeout):
            from .worker.rules import JobOptions

            options = self._options = JobOptions(
                tries=self.tries, backoff=self.backoff, timeout=self.timeout)
        return options

    def after_settle(self, claim: Claim, decision: Decision) -> None:
        """Called once the worker (or supervisor) settled an attempt of this job.

        Nothing to do for a plain job; the django.tasks job records its result here.
        """


def job(
    name: str | Callable[..., Any] | None = None,
    *,
    queue: str = "default",
    tries: int = 3,
    backoff: Backoff = None,
    timeout: float | None = 60,
    retry_until: timedelta | Callable[..., datetime] | None = None,
    unique_key: Callable[..., str | None] | None = None,
    priority: int = 0,
    schedule: str | float | timedelta | None = None,
    concurrency: int | None = None,
    concurrency_key: Callable[..., str | None] | None = None,
) -> Any:
    """Register a function as a job: `@job`, `@job("app.name")` or `@job(queue="mail")`.

    `schedule` pushes it with no arguments at each tick of a cron expression
    ("0 3 * * *") or every so many seconds (or a timedelta): see the README's Schedules.
    With `concurrency=N`, at most N of its jobs run at once across every worker: per
    `concurrency_key(*args, **kwargs)` if given (a key of None: per job name).
    """

    def decorate(func: Callable[P, R]) -> JobFunction[P, R]:
        if isinstance(func, JobFunction):
            raise TypeError(f"{func.name!r} is already a job.")
        job_function: JobFunction[P, R] = JobFunction(
            func,
            name=name if isinstance(name, str) else None,
            queue=queue,
            tries=tries,
            backoff=backoff,
            timeout=timeout,
            retry_until=retry_until,
            unique_key=unique_key,
            priority=priority,
            schedule=schedule,
            concurrency=concurrency,
            concurrency_key=concurrency_key,
        )
        registry.register(job_function)
        return job_function

    if callable(name):  # bare @job
        return decorate(name)
    return decorate
