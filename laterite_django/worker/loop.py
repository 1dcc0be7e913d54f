"""The worker: claim the next due jobs, run each under its timeout, settle it.

The rules of the contract live here, not in the stores: attempts, backoff,
tries, the retry window, Retry/Fail, undecodable payloads, unknown names and
claims reclaimed past their tries.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
import time
import traceback
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import close_old_connections, connections
from django.utils import timezone

from .. import payload
from ..backoff import delay_after
from ..conf import settings
from ..context import JobContext
from ..exceptions import Fail, InvalidPayload, JobNotRegistered, Retry, StoreUnavailable
from ..registry import registry
from ..signals import job_failed, job_retrying, job_started, job_succeeded
from ..stores import Claim, Store, get_store
from .execute import JobTimeout, call_job, time_limit
from .heartbeat import Heartbeat
from .memory import resident_bytes
from .reports import Monitor

__all__ = ["Outcome", "Worker", "WorkerStopped", "default_worker_name"]

logger = logging.getLogger("laterite")

LOST_PREFIX = "worker lost"
LOST_REASON = LOST_PREFIX + ": its claim expired after {seconds:g} s without a heartbeat"
TIMEOUT_REASON = "JobTimeout: timed out after {seconds:g} s"

# How long a worker keeps trying to settle a finished job while its store is down.
SETTLE_PATIENCE = 60.0
# A batch grows while its jobs run faster than this, and shrinks when slower, so
# claimed jobs never wait long behind the one running.
FAST_BATCH = 0.05
SLOW_BATCH = 0.25
# Finished jobs are deleted with the next claim, or after this long at the latest.
FLUSH_AFTER = 0.05


class WorkerStopped(BaseException):
    """Raised in the worker's thread by a second stop signal: stop now, jobs back to the queue."""


def default_worker_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


@dataclass(slots=True)
class Outcome:
    """How one attempt ended: "succeeded", "retrying", "failed", "returned" or "lost"."""

    status: str
    error: str = ""


class Worker:
    """Claim, run and settle jobs from `queues` until told to stop or a limit is hit."""

    def __init__(
        self,
        queues: Sequence[str] | None = None,
        *,
        name: str | None = None,
        store: Store | None = None,
        batch: int = 1,
        once: bool = False,
        stop_when_empty: bool = False,
        max_jobs: int | None = None,
        max_seconds: float | None = None,
        sleep: float | None = None,
        retry_after: float | None = None,
        max_memory: int | None = None,
        monitor: Monitor | None = None,
    ) -> None:
        self.queues = list(queues or settings.QUEUES)
        self.name = name or default_worker_name()
        self.store = store or get_store()
        self.batch = max(1, batch)  # the most jobs one claim takes
        self._limit = 1  # what the next claim asks for: grows while the queue is deep
        # Jobs that succeeded, deleted in one go with the next claim (or on a flush).
        self._finished: list[Claim] = []
        self._finished_since = 0.0
        self.once = once
        self.stop_when_empty = stop_when_empty
        self.max_jobs = max_jobs
        self.max_seconds = max_seconds
        self.sleep = settings.POLL if sleep is None else sleep
        self.retry_after = float(settings.RETRY_AFTER if retry_after is None else retry_after)
        self.max_memory = max_memory  # bytes
        self.settle_patience = SETTLE_PATIENCE
        self.monitor = monitor or Monitor()
        self.processed = 0
        self.stopping = threading.Event()
        self.stop_reason = ""
        self._stop_now = False
        self._in_job = False
        self.heartbeat = Heartbeat(self.store, interval=max(0.2, self.retry_after / 3))
        self._next_requeue = 0.0
        self._started = time.monotonic()

    # -- control --------------------------------------------------------------------

    def stop(self) -> None:
        """Finish the jobs in hand, claim no more."""
        self.stop_reason = self.stop_reason or "stopped"
        self.stopping.set()

    def stop_now(self) -> None:
        """Stop the running job now and give the jobs in hand back to their queues.

        Call it from a signal handler in the worker's thread: it raises
        WorkerStopped there if a job is running; otherwise the loop returns
        its claims before it runs another.
        """
        self.stop_reason = "stopped"
        self._stop_now = True
        self.stopping.set()
        if self._in_job:
            raise WorkerStopped

    def _limit_reached(self) -> bool:
        """Say whether a limit stops this worker, and record which in `stop_reason`."""
        if self.max_jobs is not None and self.processed >= self.max_jobs:
            self.stop_reason = "max-jobs"
        elif (
            self.max_seconds is not None
            and time.monotonic() - self._started >= self.max_seconds
        ):
            self.stop_reason = "max-seconds"
        elif (
            self.max_memory is not None
            and self.processed
            and resident_bytes() > self.max_memory
        ):
            self.stop_reason = "max-memory"
        else:
            return False
        return True

    # -- the loop -------------------------------------------------------------------

    def run(self) -> int:
        """Work until stopped or done; return the number of jobs handled."""
        self._started = time.monotonic()
        self.heartbeat.start()
        logger.info(
            "Worker %s started on queues %s",
            self.name,
            ", ".join(self.queues),
            extra={"action": "worker_started", "worker": self.name, "queues": self.queues},
        )
        unavailable_for = 0.0
        try:
            while not self.stopping.is_set() and not self._limit_reached():
                try:
                    close_old_connections()
                    self._requeue_abandoned()
                    claims = self.store.settle_and_claim(
                        self._finished, self.queues, self.name, self._claim_limit()
                    )
                    self._flushed()
                    unavailable_for = 0.0
                    if not claims:
                        if self.stop_when_empty or self.once:
                            self.stop_reason = "empty"
                            break
                        self.store.wait(self.queues, self.sleep, self.stopping)
                        continue
                    self.run_claims(claims)
                    if self.once:
                        self.stop_reason = "once"
                        break
                except (StoreUnavailable, *_connection_errors()) as e:
                    # The store is down: say so, back off, try again. Claims in hand
                    # expire and return to their queues after retry_after.
                    unavailable_for = min(max(unavailable_for * 2, 0.5), 30.0)
                    logger.warning(
                        "Store unavailable (%s); retrying in %.1f s",
                        e,
                        unavailable_for,
                        extra={"action": "store_unavailable", "worker": self.name},
                    )
                    self.heartbeat.drop_all()
                    self.heartbeat.hold(self._finished)  # still to delete once it is back
                    self._drop_broken_connections()
                    self.stopping.wait(unavailable_for)
                    continue
                if self.once:
                    break
        except WorkerStopped:
            pass
        finally:
            try:
                self._flush()
            except Exception:
                logger.exception("Could not delete %d finished jobs; they may run again",
                                 len(self._finished))
            self._return_held()
            self.heartbeat.stop()
            with contextlib.suppress(Exception):
                self.store.close()  # this thread's connections, its LISTEN one included
            self.monitor.exit(self.stop_reason or "stopped")
            logger.info(
                "Worker %s stopped after %d jobs (%s)",
                self.name,
                self.processed,
                self.stop_reason or "stopped",
                extra={"action": "worker_stopped", "worker": self.name, "jobs": self.processed,
                       "reason": self.stop_reason or "stopped"},
            )
        return self.processed

    def _claim_limit(self) -> int:
        if self.once:
            return 1
        if self.max_jobs is not None:
            return max(1, min(self._limit, self.max_jobs - self.processed))
        return self._limit

    def run_claims(self, claims: list[Claim]) -> None:
        """Run a batch of claimed jobs in order; return the rest if told to stop."""
        asked = self._claim_limit()
        started = time.monotonic()
        self.heartbeat.hold(claims)
        self.monitor.hold(claims)
        for index, claim in enumerate(claims):
            if self.stopping.is_set() and (index > 0 or self._stop_now):
                break
            self.run_claim(claim)
            self.processed += 1
            if self._finished and time.monotonic() - self._finished_since > FLUSH_AFTER:
                self._flush()
        self._return_held()
        # Claim more at once while the queue is deep and its jobs are quick.
        per_batch = time.monotonic() - started
        if len(claims) >= asked and per_batch < FAST_BATCH:
            self._limit = min(self.batch, self._limit * 2)
        elif len(claims) < asked or per_batch > SLOW_BATCH:
            self._limit = max(1, self._limit // 2)

    def _flush(self) -> None:
        """Delete the finished jobs now."""
        if self._finished:
            finished = self._finished
            deleted = self._settle(lambda: self.store.delete(finished))
            if deleted < len(finished):
                logger.warning(
                    "%d finished jobs had lost their claims; not settled again",
                    len(finished) - deleted, extra={"action": "claim_lost"},
                )
            self._flushed()

    def _flushed(self) -> None:
        """The finished jobs are deleted: they leave the hands of this worker."""
        for claim in self._finished:
            self.heartbeat.drop(claim)
            self.monitor.done(claim)
        self._finished = []

    def _return_held(self) -> None:
        """Give back claims not yet run (a stop mid-batch); they lose no attempt."""
        finished = {id(claim) for claim in self._finished}
        for claim in self.heartbeat.held():
            if id(claim) in finished:
                continue
            try:
                self.give_back(claim)
            except Exception:
                logger.exception("Could not return job %s to its queue", claim.id)
                self.heartbeat.drop(claim)

    def _requeue_abandoned(self) -> None:
        now = time.monotonic()
        if now < self._next_requeue:
            return
        self._next_requeue = now + min(5.0, self.retry_after / 3)
        older_than = timezone.now() - timedelta(seconds=self.retry_after)
        count = self.store.requeue_abandoned(
            older_than, LOST_REASON.format(seconds=self.retry_after)
        )
        if count:
            logger.warning(
                "Returned %d abandoned jobs to their queues",
                count,
                extra={"action": "requeued_abandoned", "count": count},
            )

    def _drop_broken_connections(self) -> None:
        for conn in connections.all(initialized_only=True):
            with contextlib.suppress(Exception):
                conn.close()
        with contextlib.suppress(Exception):
            self.store.close()

    # -- one job --------------------------------------------------------------------

    def run_claim(self, claim: Claim) -> Outcome:
        """Run one claimed job and settle it by the rules."""
        outcome = None
        try:
            outcome = self._run_claim(claim)
            return outcome
        finally:
            if outcome is not None and outcome.status == "succeeded":
                self.monitor.succeeded(claim)  # deleted later, with the next claim
            else:
                self.monitor.done(claim)

    def _run_claim(self, claim: Claim) -> Outcome:
        started = time.monotonic()
        base = {"id": claim.id, "name": claim.name, "queue": claim.queue,
                "attempts": claim.attempts}
        try:
            job = registry.get(claim.name)
        except JobNotRegistered as e:
            return self._fail(claim, f"unknown job: {e}")
        if (
            claim.last_error.startswith(LOST_PREFIX)
            and job.tries
            and claim.attempts > job.tries
            and not _in_window(claim, timezone.now())
        ):
            # Reclaimed after its worker died, with no tries left: do not run it again.
            # (A job released for retry was allowed its next attempt when released.)
            return self._fail(claim, f"{claim.last_error}; no tries left ({job.tries})")
        try:
            args, kwargs = payload.decode(claim.payload)
            job._check_arguments(args, kwargs)
        except (InvalidPayload, TypeError) as e:
            return self._fail(claim, f"payload does not decode: {e}")

        cx = JobContext(id=claim.id, name=claim.name, queue=claim.queue,
                        attempt=claim.attempts, pushed_at=claim.pushed_at)
        job_started.send(sender=job, **base)
        # LogRecord reserves "name": log the job's name as "job".
        logged = {"job_id": claim.id, "job": claim.name, "queue": claim.queue,
                  "attempts": claim.attempts}
        logger.info("Job %s #%s started (attempt %d)", claim.name, claim.id, claim.attempts,
                    extra={"action": "job_started", **logged})
        # A job starts and ends on connections fit for use, whatever the last one did.
        close_old_connections()
        self.monitor.start(claim, job.timeout)
        try:
            self._in_job = True
            try:
                with time_limit(job.timeout):
                    result = call_job(job, args, kwargs, cx)
            finally:
                self._in_job = False
                with contextlib.suppress(Exception):  # never in place of the job's outcome
                    close_old_connections()
        except Retry as e:
            error = f"Retry: {e.message}" if e.message else "Retry"
            outcome = self._retry_or_fail(claim, job, error, e.delay)
        except Fail as e:
            outcome = self._fail(claim, f"Fail: {e.message}" if e.message else "Fail")
        except JobTimeout:
            error = TIMEOUT_REASON.format(seconds=job.timeout)
            outcome = self._retry_or_fail(claim, job, f"{error}\n\n{traceback.format_exc()}")
        except WorkerStopped:
            # Stopped now (a second signal): give the job back, not counted as an attempt.
            self.give_back(claim)
            raise
        except Exception as e:
            outcome = self._retry_or_fail(claim, job, _describe(e))
        else:
            # Deleted with the next claim (one round trip for both), or by _flush.
            if not self._finished:
                self._finished_since = time.monotonic()
            self._finished.append(claim)
            outcome = Outcome("succeeded")
            job_succeeded.send(
                sender=job, duration=time.monotonic() - started, result=result, **base
            )
        duration = time.monotonic() - started
        if outcome.status == "lost":
            logger.warning(
                "Job %s #%s finished but its claim was lost; not settling it again",
                claim.name, claim.id, extra={"action": "claim_lost", **logged},
            )
        logger.info(
            "Job %s #%s %s in %.3f s",
            claim.name, claim.id, outcome.status, duration,
            extra={"action": f"job_{outcome.status}", "duration": duration,
                   "error": outcome.error.split("\n", 1)[0], **logged},
        )
        return outcome

    # -- settling for a process that cannot ------------------------------------------

    def settle_failed_attempt(self, claim: Claim, error: str) -> Outcome:
        """Count `claim` as a failed attempt with `error`: retry or fail it by its job's rules.

        For a claim whose worker can no longer settle it (killed past its
        timeout, or dead), settled by the process that watched it.
        """
        try:
            job = registry.get(claim.name)
        except JobNotRegistered as e:
            return self._fail(claim, f"unknown job: {e}")
        return self._retry_or_fail(claim, job, error)

    def give_back(self, claim: Claim) -> bool:
        """Return `claim` to its queue, due now, not counted as an attempt."""
        try:
            return self._settle(lambda: self.store.release(
                claim, timezone.now(), claim.last_error, undo_attempt=True))
        finally:
            self.heartbeat.drop(claim)

    def _settle(self, action):
        """Run a store call that settles a claim, retrying while the store is down.

        A finished job settled late beats one run twice: keep trying for up to
        `settle_patience` seconds, unless told to stop now.
        """
        wait = 0.25
        deadline = time.monotonic() + self.settle_patience
        while True:
            try:
                return action()
            except (StoreUnavailable, *_connection_errors()) as e:
                if self._stop_now or time.monotonic() + wait > deadline:
                    raise
                logger.warning(
                    "Store unavailable while settling a job (%s); retrying in %.1f s", e, wait,
                    extra={"action": "store_unavailable", "worker": self.name},
                )
                self._drop_broken_connections()
                time.sleep(wait)
                wait = min(wait * 2, 5.0)

    def _retry_or_fail(
        self, claim: Claim, job, error: str, delay: float | None = None
    ) -> Outcome:
        now = timezone.now()
        if delay is None:
            delay = delay_after(job.backoff, claim.attempts)
        next_at = now + timedelta(seconds=delay)
        tries_left = (job.tries == 0 and claim.retry_until is None) or (
            job.tries and claim.attempts < job.tries
        )
        if not (tries_left or _in_window(claim, next_at)):
            return self._fail(claim, error)
        released = self._settle(lambda: self.store.release(claim, next_at, error))
        self.heartbeat.drop(claim)
        if not released:
            return Outcome("lost", error)
        job_retrying.send(sender=job, id=claim.id, name=claim.name, queue=claim.queue,
                          attempts=claim.attempts, error=error, delay=delay)
        return Outcome("retrying", error)

    def _fail(self, claim: Claim, error: str) -> Outcome:
        failed_id = self._settle(lambda: self.store.fail(claim, error))
        self.heartbeat.drop(claim)
        if failed_id is None:
            return Outcome("lost", error)
        sender = registry.find(claim.name) or Worker
        job_failed.send(sender=sender, id=claim.id, name=claim.name, queue=claim.queue,
                        attempts=claim.attempts, error=error, payload=claim.payload,
                        failed_id=failed_id)
        return Outcome("failed", error)


def _in_window(claim: Claim, moment: datetime) -> bool:
    return claim.retry_until is not None and moment <= claim.retry_until


def _describe(error: BaseException) -> str:
    """First line: the exception and its message; then the traceback."""
    summary = f"{type(error).__module__}.{type(error).__qualname__}: {error}".removeprefix(
        "builtins."
    )
    return f"{summary}\n\n{''.join(traceback.format_exception(error))}"


def _connection_errors() -> tuple[type[BaseException], ...]:
    from django.db import InterfaceError, OperationalError

    errors: list[type[BaseException]] = [OperationalError, InterfaceError]
    try:
        from redis.exceptions import ConnectionError as RedisConnectionError
        from redis.exceptions import TimeoutError as RedisTimeoutError

        errors += [RedisConnectionError, RedisTimeoutError]
    except ImportError:
        pass
    return tuple(errors)
