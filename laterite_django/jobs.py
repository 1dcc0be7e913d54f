"""The @job decorator and the job object it returns: push, push_in, push_at, push_many."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from functools import update_wrapper
from typing import TYPE_CHECKING, Any, Generic, ParamSpec, TypedDict, TypeVar, Unpack

from django.db import transaction
from django.utils import timezone

from . import capture, encryption, inline, payload, tracing
from .async_push import AsyncPushes, refuse_event_loop, running_loop
from .calls import JobCall
from .conf import settings, validate_all
from .context import Pushed
from .core.backoff import Backoff
from .core.fairness import cost_of, weight_of
from .core.rules import JobOptions
from .core.sequences import with_sequence
from .core.sizes import PRIORITY_MAX as _PRIORITY_MAX
from .core.sizes import PRIORITY_MIN as _PRIORITY_MIN
from .core.values import NewJob
from .definition import check_options
from .push_checks import (
    DEBOUNCE_NAMES,
    Call,
    Debounce,
    PushChecks,
    checked_key,
    split_debounce,
)
from .registry import registry
from .stores import Store, get_store

if TYPE_CHECKING:
    from .core.rules import Decision
    from .core.values import Claim

__all__ = ["JobFunction", "encrypted_positions", "fair_of_payload", "job", "job_concurrency_key",
           "limit_of_payload", "set_thread_starter"]

P = ParamSpec("P")
R = TypeVar("R")


# Starts the `worker` mode's threads in this process if they are not running: the
# worker's (worker.threads), which sits above the push, set at start-up (apps.ready).
_start_worker_threads: Callable[[], None] | None = None


def set_thread_starter(start: Callable[[], None]) -> None:
    """Register what a push in the `worker` mode calls to start the worker threads
    (called by ready())."""
    global _start_worker_threads
    _start_worker_threads = start


class JobFunction(AsyncPushes[P, R], PushChecks, Generic[P, R]):
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
        max_snoozes: int = 100,
        debounce: float | timedelta | None = None,
        debounce_max: float | timedelta | None = None,
        debounce_key: Callable[..., str] | None = None,
        encrypt: bool | Sequence[str] = False,
        fair_key: Callable[..., str | None] | None = None,
        sequence: Callable[..., str | None] | None = None,
        sequence_on_failure: str = "wait",
    ) -> None:
        self.func = func
        self.qualified_function = f"{func.__module__}.{func.__qualname__}"
        self.name = name or self.qualified_function
        self.queue = queue
        self.tries = tries
        self.backoff = backoff
        self.timeout = timeout
        # How often it may `Snooze` before the next snooze fails it (0: no ceiling).
        self.max_snoozes = max_snoozes
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
        # Every push debounced (see Debounce): due `debounce` after the last push of its
        # `debounce_key(*args, **kwargs)`, not later than `debounce_max` after the first.
        self.debounce = debounce
        self.debounce_max = debounce_max
        self.debounce_key = debounce_key
        # Its queue serves its jobs key by key in turn (core/fairness.py), each job's key
        # `fair_key(*args, **kwargs)` (None: the jobs without a key).
        self.fair_key = fair_key
        # Its jobs of one key `sequence(*args, **kwargs)` run one at a time in push order
        # (core/sequences.py); when one fails for good the rest wait, or go on
        # (sequence_on_failure="continue").
        self.sequence = sequence
        self.sequence_on_failure = sequence_on_failure
        self.is_async = inspect.iscoroutinefunction(func)
        signature = inspect.signature(func)
        self.takes_cx = "cx" in signature.parameters
        self._call_signature = signature.replace(
            parameters=[p for p in signature.parameters.values() if p.name != "cx"]
        )
        # Arguments stored encrypted (see `encryption`): all (True), or those named.
        self.encrypt = encrypt
        self.encrypted_positions = encrypted_positions(self._call_signature, encrypt, self.name)
        self._good_shapes: set[tuple | int] = set()
        self._check_name_and_queue(self.queue)
        # The name and queue last checked at a push (_ready), so each is checked once.
        self._name_ok: Any = None
        self._queue_ok: Any = None
        # Whether concurrency_of is this class's own (None without `concurrency`), so a
        # push without a limit need not call it; the django.tasks job overrides it.
        self._plain_concurrency = type(self).concurrency_of is JobFunction.concurrency_of
        check_options(self)
        update_wrapper(self, func)

    def __repr__(self) -> str:
        return f"<JobFunction {self.name} queue={self.queue!r}>"

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        """Run the function here and now, like the plain function."""
        return self.func(*args, **kwargs)

    # -- pushing --------------------------------------------------------------------

    def push(self, *args: P.args, **kwargs: P.kwargs) -> Pushed:
        """Store a call to run as soon as a worker is free.

        With `debounce=S` (seconds or a timedelta), `debounce_key=K` and optionally
        `debounce_max=M`, names the push keeps for itself: if a job holding key K is
        waiting, it takes this call's arguments and is due S seconds from now, but not
        later than M seconds after its first push (`Pushed.debounced`); else a new job
        holding K is due in S seconds.
        """
        if kwargs and not DEBOUNCE_NAMES.isdisjoint(kwargs):
            args_kwargs, given = split_debounce(kwargs)
            return self._push_one(args, args_kwargs, None, None, None, given=given)
        return self._push_one(args, kwargs, None, None, None)

    def push_in(self, delay: timedelta | float, /, *args: P.args, **kwargs: P.kwargs) -> Pushed:
        """Store a call to run after `delay` (a timedelta or seconds), counted from the
        store's now by its clock (see NewJob.delay)."""
        if kwargs and not DEBOUNCE_NAMES.isdisjoint(kwargs):
            self._refuse_debounce("push_in")
        return self._push_one(args, kwargs, None, None, None, self._seconds(delay))

    def push_at(self, when: datetime, /, *args: P.args, **kwargs: P.kwargs) -> Pushed:
        """Store a call to run at `when`, an aware datetime."""
        if kwargs and not DEBOUNCE_NAMES.isdisjoint(kwargs):
            self._refuse_debounce("push_at")
        return self._push_one(args, kwargs, self._checked_when(when), None, None)

    def _refuse_debounce(self, form: str) -> None:
        """Refuse a debounce given to a push that sets its own due time."""
        raise TypeError(
            f"Job {self.name!r}: {form} takes no debounce, debounce_max or debounce_key: a "
            f"debounced job's due time is the debounce's; use push(..., debounce=S, "
            f"debounce_key=K).")

    def call(self, *args: P.args, **kwargs: P.kwargs) -> JobCall:
        """A call of this job to push later, in a chain or a batch; checked and encoded
        as a push would be."""
        return JobCall.checked(self, args, kwargs)

    def push_many(self, calls: Iterable[Call]) -> list[Pushed]:
        """Store many calls in one round trip: each an args tuple/list or a kwargs dict."""
        return self.enqueue_many(self._pairs(calls))

    def enqueue(
        self,
        args: Sequence[Any],
        kwargs: Mapping[str, Any],
        *,
        at: datetime | None = None,
        queue: str | None = None,
        priority: int | None = None,
        debounce: float | timedelta | None = None,
        debounce_max: float | timedelta | None = None,
        debounce_key: str | None = None,
        fair_key: str | None = None,
        sequence: str | None = None,
    ) -> Pushed:
        """Push one call with explicit options (`at`: an aware datetime within 10 years
        of now; `debounce`, `debounce_max`, `debounce_key`: as push's, not with `at`;
        `fair_key`: the key its queue serves it under, in turn with the others, over the
        job's own fair_key; `sequence`: the key of the sequence it runs in, in push
        order, over the job's own sequence)."""
        given = None
        if debounce is not None or debounce_max is not None or debounce_key is not None:
            given = {"debounce": debounce, "debounce_max": debounce_max,
                     "debounce_key": debounce_key}
        if fair_key is not None:
            given = {**(given or {}), "fair_key": fair_key}
        if sequence is not None:
            given = {**(given or {}), "sequence": sequence}
        if at is not None:
            at = self._checked_when(at)
        return self._push_one(args, kwargs, at, queue, priority, given=given)

    def _push_one(self, args: Sequence[Any], kwargs: Mapping[str, Any], at: datetime | None,
                  queue: str | None, priority: int | None, delay: float = 0.0,
                  given: Mapping[str, Any] | None = None) -> Pushed:
        """enqueue_many for one call, in fewer steps: the push most code makes, whose
        every Python call shows in its cost (the same checks, in the same order).
        `given`: the push's own debounce options, if it named any."""
        if running_loop() is not None:
            refuse_event_loop(self.name)
        queue = self._ready(queue)
        now = timezone.now()
        new = self._new_job(args, kwargs, at, queue, priority, now, tracing.carrier(), delay,
                            given)
        if capture.capturing():
            return capture.record(self, [new])[0]
        if settings.MODE == "inline":
            return inline.run(self, new)
        if new.debounce is not None:
            return self.store_debounced((new,))[0]
        return self.store_jobs((new,))[0]

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
        if self.debounce is not None:
            # Each call debounced by its own key, one after the other.
            return self.store_debounced(new_jobs)
        return self.store_jobs(new_jobs)

    def new_jobs(
        self,
        calls: Sequence[tuple[Sequence[Any], Mapping[str, Any]]],
        *,
        at: datetime | None = None,
        queue: str | None = None,
        priority: int | None = None,
        delay: float = 0.0,
        debounce: Mapping[str, Any] | None = None,
    ) -> list[NewJob]:
        """Check and encode (args, kwargs) pairs as jobs to store; no I/O. Without `at`,
        each is due `delay` seconds after the store's now, by its clock (NewJob.delay).
        `debounce`: the push's own debounce options (see push), over the job's."""
        queue = self._ready(queue)
        if at is not None:
            at = self._checked_when(at)
        now = timezone.now()
        trace = tracing.carrier()  # the pusher's span, for the attempts' spans
        return [self._new_job(args, kwargs, at, queue, priority, now, trace, delay, debounce)
                for args, kwargs in calls]

    def _ready(self, queue: str | None) -> str:
        """The queue of a push (`queue`, or the job's own) once the push may go ahead:
        the job is registered, its name and the queue are valid (each checked once)."""
        name = self.name
        if registry.find(name) is not self:
            self._check_registered()
        if queue is None:
            queue = self.queue
        if queue is not self._queue_ok or name is not self._name_ok:
            self._check_name_and_queue(queue)
            # The name and the queue are checked apart: any two that passed go together.
            self._queue_ok, self._name_ok = queue, name
        return queue

    def _new_job(
        self, args: Sequence[Any], kwargs: Mapping[str, Any], at: datetime | None,
        queue: str, priority: int | None, now: datetime, trace: Mapping[str, str] | None,
        delay: float = 0.0, given: Mapping[str, Any] | None = None,
    ) -> NewJob:
        """One call checked and encoded as a job to store (its queue checked already): due
        at `at`, else `delay` seconds after the store's now (NewJob.delay); debounced
        if the job or the push (`given`) says so."""
        self._check_arguments(args, kwargs)
        if priority is None:
            priority = self.priority
        if type(priority) is not int or not _PRIORITY_MIN <= priority <= _PRIORITY_MAX:
            self._check_priority(priority)
        name = self.name
        new = NewJob(
            name=name,
            queue=queue,
            payload=payload.encode(name, args, kwargs, trace) if not self.encrypt
            else encryption.sealed_payload(self, args, kwargs, trace),
            available_at=at or (now + timedelta(seconds=delay) if delay else now),
            pushed_at=now,
            retry_until=None if self.retry_until is None else self._retry_until(
                now, args, kwargs),
            unique_key=None if self.unique_key is None else self._unique_key(args, kwargs),
            priority=priority,
            delay=None if at is not None else delay,
        )
        if self.concurrency is not None or not self._plain_concurrency:
            limited = self.concurrency_of(args, kwargs)
            if limited is not None:
                new.concurrency_limit, new.concurrency_key = limited
        if given is not None and "fair_key" in given:
            fair_key = given["fair_key"]
            given = {k: v for k, v in given.items() if k != "fair_key"} or None
            self._fair(new, args, kwargs, fair_key)
        elif self.fair_key is not None or queue in settings.FAIRNESS:
            self._fair(new, args, kwargs)
        sequence: Any = None
        if given is not None and "sequence" in given:
            sequence = given["sequence"]
            given = {k: v for k, v in given.items() if k != "sequence"} or None
        elif self.sequence is not None:
            sequence = self.sequence(*args, **kwargs)
        if given is not None or self.debounce is not None:
            debounce = self._debounce_of(args, kwargs, given)
            if debounce is not None:
                if sequence is not None:
                    raise TypeError(
                        f"Job {name!r}: a job of a sequence cannot be debounced (a "
                        f"debounced job is replaced in place, a sequence's run in push "
                        f"order); push it without debounce, or without a sequence.")
                self._debounced(new, debounce, at, delay)
        if sequence is not None:
            self._in_sequence(new, sequence)
        if self.encrypt:
            encryption.hash_keys(self, new)
        return new

    def _in_sequence(self, new: NewJob, key: Any) -> None:
        """Mark `new` as a job of sequence `key` (its payload's first item, see
        core/sequences.py); a key made from encrypted arguments as its keyed hash."""
        checked_key(self.name, "the sequence key", key,
                    f"the sequence key {key!r} must be a str or None.")
        if self.encrypt:
            key = encryption.hashed(self.name, key)
        new.payload = with_sequence(new.payload, key, self.sequence_on_failure == "continue")

    def _fair(self, new: NewJob, args: Sequence[Any], kwargs: Mapping[str, Any],
              key: Any = None) -> None:
        """Make `new` a job of a fair queue: its key (`key`, the push's own, else the
        job's fair_key of the call) and the virtual time one job of it takes."""
        if key is None and self.fair_key is not None:
            key = self.fair_key(*args, **kwargs)
        if key is not None:
            checked_key(self.name, "the fair_key", key,
                        f"the fair key {key!r} must be a str or None.")
        new.fair_cost = cost_of(weight_of(settings.FAIRNESS, new.queue, key))
        # A key made from encrypted arguments is stored as its HMAC, as the other keys are.
        new.fair_key = encryption.hashed(self.name, key) if self.encrypt and key else key

    def _debounced(self, new: NewJob, debounce: Debounce, at: datetime | None,
                   delay: float) -> None:
        """Make `new` a debounced push: its key, due `debounce.seconds` after the store's
        now; refuse one given a due time of its own (push_at, push_in, `at`)."""
        if at is not None or delay:
            self._refuse_debounce("push_in" if delay else "push_at")
        new.unique_key = debounce.key
        new.debounce = new.delay = debounce.seconds
        new.debounce_max = debounce.longest
        new.available_at = new.pushed_at + timedelta(seconds=debounce.seconds)

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
        store = get_store()
        after_commit = self._after_commit(store, new_jobs)
        if after_commit is not None:
            return after_commit
        ids = store.push(new_jobs)
        return [Pushed("duplicate") if i is None else Pushed("queued", i) for i in ids]

    def store_debounced(self, new_jobs: Sequence[NewJob]) -> list[Pushed]:
        """Hand checked debounced jobs to the store one at a time, in order (each its own
        atomic step: Store.push_debounced); after the commit if the store cannot join the
        caller's transaction, when whether each replaced a waiting job is not known."""
        store = get_store()
        after_commit = self._after_commit(store, new_jobs)
        if after_commit is not None:
            return after_commit
        pushed = []
        for new in new_jobs:
            job_id, replaced = store.push_debounced(new)
            pushed.append(Pushed("queued", job_id, debounced=replaced))
        return pushed

    @classmethod
    def _after_commit(cls, store: Store, new_jobs: Sequence[NewJob]) -> list[Pushed] | None:
        """Start the worker threads in the `worker` mode; if the store cannot join the
        caller's transaction, hand it `new_jobs` to push once it commits and return
        their outcome (queued, no id yet); else None: the caller pushes them now."""
        if settings.MODE == "worker":
            cls._start_worker_mode()
        alias = settings.DATABASE
        if not store.transactional_push and transaction.get_connection(alias).in_atomic_block:
            store.push_on_commit(new_jobs)
            return [Pushed("queued") for _ in new_jobs]
        return None

    @staticmethod
    def _start_worker_mode() -> None:
        """In the `worker` mode, refuse bad settings and start the worker threads."""
        validate_all()  # no system check ran under a WSGI server: refuse bad settings
        if _start_worker_threads is None:
            raise RuntimeError("laterite_django is not ready: is it in INSTALLED_APPS?")
        _start_worker_threads()

    def options_for(self, args: Sequence[Any], kwargs: Mapping[str, Any]) -> JobOptions:
        """The options the worker's rules apply to one call: this job's own.

        The django.tasks job overrides it to read the options of the Task it runs.
        """
        options = self._options
        if (options is None or options.tries != self.tries or options.backoff is not self.backoff
                or options.timeout != self.timeout or options.max_snoozes != self.max_snoozes):
            options = self._options = JobOptions(
                tries=self.tries, backoff=self.backoff, timeout=self.timeout,
                max_snoozes=self.max_snoozes)
        return options

    def after_settle(self, claim: Claim, decision: Decision) -> None:
        """Called once the worker (or supervisor) settled an attempt of this job.

        Nothing to do for a plain job; the django.tasks job records its result here.
        """


class JobParams(TypedDict, total=False):
    """The options `@job` hands to JobFunction, typed as JobFunction takes them (which
    gives their defaults); mypy checks the one against the other where job() passes them."""

    queue: str
    tries: int
    backoff: Backoff
    timeout: float | None
    retry_until: timedelta | Callable[..., datetime] | None
    unique_key: Callable[..., str | None] | None
    priority: int
    schedule: str | float | timedelta | None
    concurrency: int | None
    concurrency_key: Callable[..., str | None] | None
    max_snoozes: int
    debounce: float | timedelta | None
    debounce_max: float | timedelta | None
    debounce_key: Callable[..., str] | None
    encrypt: bool | Sequence[str]
    fair_key: Callable[..., str | None] | None
    sequence: Callable[..., str | None] | None
    sequence_on_failure: str


def job(name: str | Callable[..., Any] | None = None, **options: Unpack[JobParams]) -> Any:
    """Register a function as a job: `@job`, `@job("app.name")` or `@job(queue="mail")`.

    The options are JobFunction's, with its defaults. `schedule` pushes it with no
    arguments at each tick of a cron expression ("0 3 * * *") or every so many seconds
    (or a timedelta): see the README's Schedules. With `concurrency=N`, at most N of its
    jobs run at once across every worker: per `concurrency_key(*args, **kwargs)` if
    given (a key of None: per job name). With `debounce=S` and
    `debounce_key=callable(*args, **kwargs) -> str` (and optionally `debounce_max=M`),
    every push is debounced (see JobFunction.push). With `encrypt=True` (or a list of
    parameter names), its arguments (or those) are stored encrypted: see
    docs/howto/encryption.md.
    """

    def decorate(func: Callable[P, R]) -> JobFunction[P, R]:
        if isinstance(func, JobFunction):
            raise TypeError(f"{func.name!r} is already a job.")
        job_function: JobFunction[P, R] = JobFunction(
            func, name=name if isinstance(name, str) else None, **options)
        registry.register(job_function)
        return job_function

    if callable(name):  # bare @job
        return decorate(name)
    return decorate


def job_concurrency_key(job: JobFunction, args: Sequence[Any], kwargs: Mapping[str, Any]
                        ) -> str:
    """The key a job's `concurrency` counts under: its `concurrency_key`'s, or its name."""
    if job.concurrency_key is None:
        return job.name
    key = job.concurrency_key(*args, **kwargs)
    if key is None:
        return job.name
    return checked_key(job.name, "the concurrency_key", key,
                       f"concurrency_key returned {key!r}; it must return a str or None.")


def limit_of_payload(name: str, text: str) -> tuple[int, str] | None:
    """The (limit, key) a push of job `name` with this payload gives it, for a job stored
    again from its payload (stores.callbacks.with_limit); None without a limit.

    A job unknown here, or a payload that no longer decodes, goes without one; a
    concurrency_key that raises now counts the job under its name.
    """
    job = registry.find(name)
    if job is None:
        return None
    try:
        args, kwargs, _ = encryption.open_arguments(text)
    except Exception:
        return None
    try:
        limited = job.concurrency_of(args, kwargs)
    except Exception:
        return None if job.concurrency is None else (job.concurrency, job.name)
    if limited is not None and job.encrypt and limited[1] != job.name:
        return limited[0], encryption.hashed(job.name, limited[1])
    return limited


def fair_of_payload(name: str, queue: str, text: str) -> tuple[str | None, int] | None:
    """The (fair key, cost) a push of job `name` into `queue` with this payload gives it,
    for a job stored again from its payload (stores.callbacks.with_fair_turn); None for a
    queue not served fairly.

    A job unknown here, a payload that no longer decodes or a fair_key that raises now
    takes the turn of the jobs without a key.
    """
    job = registry.find(name)
    fair = settings.FAIRNESS
    if (job is None or job.fair_key is None) and queue not in fair:
        return None
    key = None
    if job is not None and job.fair_key is not None:
        try:
            args, kwargs, _ = encryption.open_arguments(text)
            key = job.fair_key(*args, **kwargs)
        except Exception:
            key = None
        if not isinstance(key, str):
            key = None
    cost = cost_of(weight_of(fair, queue, key))
    if key is not None and job is not None and job.encrypt:
        key = encryption.hashed(name, key)
    return key, cost


def encrypted_positions(signature: inspect.Signature, encrypt: Any, job_name: str
                        ) -> dict[str, int | None] | None:
    """For `encrypt=[names]`: each name's position among the positional parameters
    (None: keyword-only); None for `encrypt=True` or False. Raise TypeError naming a
    name that is not a named parameter of the function."""
    if isinstance(encrypt, bool):
        return None
    if isinstance(encrypt, str) or not isinstance(encrypt, Sequence) or not encrypt:
        raise TypeError(f"Job {job_name!r}: encrypt must be True, False or a non-empty list "
                        f"of parameter names, got {encrypt!r}.")
    parameters = list(signature.parameters.values())
    named = {p.name: p for p in parameters
             if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)}
    positional = [p.name for p in parameters
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    positions: dict[str, int | None] = {}
    for name in encrypt:
        if not isinstance(name, str) or name not in named:
            raise TypeError(
                f"Job {job_name!r}: encrypt names {name!r}, which is not a named parameter of "
                f"its function "
                f"(its parameters: {', '.join(named) or 'none'}); use encrypt=True for "
                f"*args and **kwargs.")
        positions[name] = positional.index(name) if name in positional else None
    return positions
