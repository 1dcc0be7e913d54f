"""Helpers for a project's tests: see what was pushed, run what is due, here.

- `capture_jobs()`: record pushes instead of storing or running them.
- `run_jobs()`: run the jobs due now in this process, by the worker's rules,
  inside a Django `TestCase` too (on the test's connection and transaction).
- `isolated_redis_prefix()`: give a test Redis keys of its own, deleted after.

None of them needs pytest.
"""

from __future__ import annotations

import os
import signal
import threading
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from numbers import Real

from django.test import override_settings

from .capture import CapturedPush, capture_jobs
from .conf import settings
from .core.values import Claim
from .stores import Store, get_store
from .stores.redis import RedisStore
from .worker.execute import in_this_thread
from .worker.loop import Worker

__all__ = ["CapturedPush", "capture_jobs", "isolated_redis_prefix", "run_jobs"]


class _TestWorker(Worker):
    """A worker on the caller's connections that can stop at a job's first exception,
    and that moves the Redis store's outbox to Redis after each job: what a job pushed
    inside the caller's open transaction is then due at once, as on the database store,
    so one call drains both."""

    def __init__(self, *args: object, raise_errors: bool, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.raise_errors = raise_errors
        self.error: BaseException | None = None

    def job_raised(self, claim: Claim, error: BaseException) -> None:
        if self.raise_errors and self.error is None:
            self.error = error
            self.stop()  # the job is settled; run no other

    def run_claims(self, claims: list[Claim]) -> None:
        super().run_claims(claims)
        _send_outbox(self.store)  # before the next claim, so those pushes are seen


def run_jobs(
    queue: str | Sequence[str] | None = None,
    *,
    raise_errors: bool = False,
    wait_delayed: float = 0,
) -> int:
    """Run the jobs due now on `queue` (a name, a list in priority order, or None for
    LATERITE_QUEUE_QUEUES) here, by the worker's rules; return how many it took.

    Jobs run one at a time in this thread, on its database connection and in its
    transaction (so inside a `TestCase` they see the test's data, and what they
    write is rolled back with it); nothing closes a connection. Failures are
    settled as a worker would: retried after the backoff, or moved to the failed
    list with the `job_failed` signal. `raise_errors=True` stops at the first
    exception a job raises (`Retry` and `Fail` included) and raises it, once that
    attempt is settled. `wait_delayed=S` also waits for delayed jobs (retries)
    due within S seconds and runs them, as `queue_work --wait-delayed S`.

    Pushes made inside the open transaction count as made: with the Redis store
    they wait in laterite's database outbox until the commit, which a `TestCase`
    never reaches, so they are moved to Redis first, and again after each job; so
    the jobs a job pushes run in the same call on every store, until nothing due is
    left.
    """
    queues = _queues(queue)
    if isinstance(wait_delayed, bool) or not isinstance(wait_delayed, Real) or wait_delayed < 0:
        raise ValueError(f"wait_delayed must be seconds >= 0, got {wait_delayed!r}.")
    store = get_store()
    _send_outbox(store)
    worker = _TestWorker(
        queues, name=f"run_jobs:{os.getpid()}", store=store, batch=1, stop_when_empty=True,
        wait_delayed=float(wait_delayed), manage_connections=False, raise_errors=raise_errors,
    )
    main = threading.current_thread() is threading.main_thread()
    alarm = signal.getsignal(signal.SIGALRM) if main else None
    try:
        with in_this_thread():
            worker.run()
    finally:
        # A job's timeout installs a SIGALRM handler; leave the caller's in place.
        if main and signal.getsignal(signal.SIGALRM) is not alarm:
            signal.signal(signal.SIGALRM, signal.SIG_DFL if alarm is None else alarm)
    if worker.error is not None:
        raise worker.error
    return worker.processed


def _queues(queue: str | Sequence[str] | None) -> list[str]:
    if queue is None:
        return list(settings.QUEUES)
    names = [queue] if isinstance(queue, str) else queue
    if (
        isinstance(names, Sequence) and names
        and all(isinstance(name, str) and name for name in names)
    ):
        return list(names)
    raise ValueError(
        f"queue must be a queue name, a list of them or None, got {queue!r}."
    )


def _send_outbox(store: Store) -> None:
    """Move the Redis store's pushes made in the open transaction to Redis."""
    if isinstance(store, RedisStore):
        store.move_outbox()


@contextmanager
def isolated_redis_prefix(prefix: str | None = None) -> Iterator[str]:
    """Give this block a LATERITE_QUEUE_PREFIX of its own (by default the configured
    one plus a random suffix) and delete every Redis key under it at the end.

    Use it around a test (`self.enterContext(isolated_redis_prefix())` in a
    `TestCase.setUp`, or a pytest fixture) so tests never share the real
    prefix's queues, nor each other's. With the database store it only sets
    the prefix.
    """
    prefix = prefix or f"{settings.PREFIX}-test-{os.getpid()}-{uuid.uuid4().hex[:12]}"
    with override_settings(LATERITE_QUEUE_PREFIX=prefix):
        try:
            yield prefix
        finally:
            if settings.STORE == "redis":
                _delete_keys(prefix)


def _delete_keys(prefix: str) -> None:
    store = get_store()
    client = store.client  # type: ignore[attr-defined]
    # The store's own prefix: on a Redis Cluster, `prefix` as the hash tag {prefix}.
    prefix = getattr(store, "prefix", prefix)
    pattern = "".join(f"\\{c}" if c in "*?[]\\" else c for c in prefix) + ":*"
    keys = list(client.scan_iter(match=pattern, count=1000))
    for start in range(0, len(keys), 1000):
        client.delete(*keys[start : start + 1000])
