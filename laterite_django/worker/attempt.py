"""One claimed job, from its claim to its settling: look it up, decode it, run it once.

How the attempt ended is described as an `rules.Attempt`; `rules` decides what
follows and `settle` carries it out. A job is run at most once per claim, and
whatever it (or a signal receiver) raises, the attempt is settled.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import time
import traceback
from dataclasses import replace
from functools import partial
from typing import TYPE_CHECKING, Any

import asgiref
from django.db import close_old_connections
from django.utils import timezone

from .. import encryption, payload
from ..context import JobContext
from ..core import rules
from ..core.cancel import reason as cancel_reason
from ..core.cipher import UndecryptableError
from ..core.marks import marks_of
from ..core.progress import check as check_progress
from ..core.rules import Action, Attempt, Decision, Ending, JobOptions
from ..core.values import Claim
from ..exceptions import (
    Cancelled,
    Fail,
    JobNotRegistered,
    LateriteConfigurationError,
    Retry,
    Snooze,
)
from ..flow.cancel import CancelWatch
from ..registry import registry
from ..resumable import Checkpoints
from ..signals import job_started, job_succeeded
from ..tracing import AttemptSpan, attempt_span
from ..workflows.cancelled import batch_cancelled
from .execute import Ran, run_job, time_limit_passed
from .settle import Settled, notify

if TYPE_CHECKING:
    from ..jobs import JobFunction
    from .loop import Worker

__all__ = ["WorkerStopped", "after_settle", "describe", "ending_of", "options_of", "run_claim"]

logger = logging.getLogger("laterite")
# Every job's start and end: on a child logger, so a worker that shows them to no one
# (queue_work's console below --verbosity 3) turns them off there and builds none.
job_lines = logging.getLogger("laterite.jobs")

# Where the frames that call a job live: this package, and for an async job the
# event loop and asgiref's thread hop. `describe` leaves them off a traceback's top.
_PLUMBING = tuple(
    os.path.dirname(path) + os.sep for path in (__file__, asyncio.__file__, asgiref.__file__)
)


class WorkerStopped(BaseException):
    """Raised in the worker's thread by a second stop signal: stop now, jobs back to the queue."""


def run_claim(worker: Worker, claim: Claim, tidy: bool = False) -> str:
    """Run one claimed job by the rules and settle it; return a `Settled` word.

    `tidy`: Django's connections were tidied at the end of the job before, and
    nothing has used them since, so the job starts without tidying them again.
    With OpenTelemetry configured, the attempt runs in its span (see `tracing`).
    """
    span = attempt_span(claim)
    if span is None:
        return _run_claim(worker, claim, None, tidy)
    settled = "stopped"  # what the span says of an attempt cut short
    try:
        settled = _run_claim(worker, claim, span, tidy)
    finally:
        span.end(settled)
    return settled


def _run_claim(worker: Worker, claim: Claim, span: AttemptSpan | None, tidy: bool) -> str:
    started = time.monotonic()
    job = registry.find(claim.name)
    options = JobOptions()
    attempt: Attempt | None = None
    raised: BaseException | None = None
    stopped = False
    secrets: list[Any] = []  # the encrypted arguments' values, scrubbed from error texts
    if job is None:
        try:
            registry.get(claim.name)  # for its message, which lists the known jobs
        except JobNotRegistered as e:
            attempt = Attempt(Ending.UNRUNNABLE, f"unknown job: {e}")
    else:
        try:
            args, kwargs, secrets = encryption.open_arguments(claim.payload)
            job._check_arguments(args, kwargs)
        except (UndecryptableError, LateriteConfigurationError) as e:
            attempt = Attempt(Ending.UNRUNNABLE,
                              f"job #{claim.id} cannot be decrypted: {e}")
        except Exception as e:
            attempt = Attempt(Ending.UNRUNNABLE,
                              f"payload does not decode: {encryption.scrub(str(e), secrets)}")
        else:
            try:
                options = job.options_for(args, kwargs)
            except Exception as e:  # the django.tasks job: a task it cannot run
                attempt = Attempt(Ending.UNRUNNABLE, str(e) or type(e).__name__)
    decision = None
    if attempt is None:
        decision = rules.before_run(claim, options, batch_cancelled=batch_cancelled(claim))
    if attempt is None and decision is None:
        assert job is not None
        watch = CancelWatch()
        checkpoints = _checkpoints(worker, claim)
        ran = _run(worker, job, claim, args, kwargs, options, watch, tidy, checkpoints)
        raised = ran.error
        if span is not None and raised is not None:
            span.raised(raised, secrets)
        stopped = isinstance(ran.error, WorkerStopped) or (
            ran.error is not None and worker.stopped_now)
        if stopped:
            attempt = Attempt(Ending.STOPPED)
        elif checkpoints.handed_over and not ran.timed_out:
            attempt = Attempt(Ending.STOPPED)  # at a chunk boundary, its cursor saved
        elif isinstance(ran.error, Cancelled) or (
                watch.asked and (ran.error is not None or ran.timed_out)):
            attempt = Attempt(Ending.CANCELLED, f"{cancel_reason(True)}\n\n"
                              f"{_traceback(ran.error) if ran.error is not None else ''}")
        else:
            attempt = ending_of(ran, options)
            if attempt.ending is Ending.SNOOZED:
                attempt = _snoozes_counted(worker, claim, attempt, checkpoints)
        if secrets and attempt.error:
            attempt = replace(attempt, error=encryption.scrub(attempt.error, secrets))
        if attempt.ending is Ending.SUCCEEDED:
            worker.hand.succeeded(claim)  # deleted with the next claim, or soon
            worker.monitor.succeeded(claim)
            if job_succeeded.receivers:
                notify(job_succeeded, job, duration=time.monotonic() - started,
                       result=ran.result, **_about(claim))
            _log(claim, Settled.SUCCEEDED, time.monotonic() - started)
            worker.ended(claim, Settled.SUCCEEDED, time.monotonic() - started)
            return Settled.SUCCEEDED
    if decision is None:
        assert attempt is not None
        decision = rules.after_attempt(claim, options, attempt, timezone.now())
    decision = _unless_cancelled(worker, claim, decision)
    checkpoint = None
    if decision.action is Action.SNOOZE:
        checkpoint = checkpoints.snoozed()  # read by _snoozes_counted
    try:
        settled = worker.settler.apply(claim, decision, checkpoint=checkpoint)
    finally:
        worker.hand.settled(claim)
        worker.monitor.done(claim)
    if job is not None and settled != Settled.LOST:
        after_settle(job, claim, decision)
    _log(claim, settled, time.monotonic() - started, decision)
    worker.ended(claim, settled, time.monotonic() - started)
    if stopped:
        raise WorkerStopped
    if raised is not None:
        worker.job_raised(claim, raised)
    return settled


def _checkpoints(worker: Worker, claim: Claim) -> Checkpoints:
    """The run's checkpoint (resumable), read from and saved to the worker's store under
    the claim, waiting out a store that is down as settling does; `cx.iterate` saves its
    cursors behind the walk (resumable.CursorWriter) unless the job is inside a
    transaction of the store's database, hands over once the worker is stopping, and
    reports its items done as progress."""
    store, patiently = worker.store, worker.settler.patiently

    def report(done: int, cursor: Any) -> None:
        worker.progress.report(claim, check_progress(done, None, f"at {_short(cursor)}"))

    return Checkpoints(
        load=lambda: patiently(lambda: store.checkpoint(claim)),
        save=lambda text, durable: patiently(
            lambda: store.save_checkpoint(claim, text, durable=durable)),
        stopping=worker.stopping.is_set, report=report,
        behind=lambda: not store.joins_callers_transaction(),
        sender=lambda: store.cursor_sender(claim))


def _short(cursor: Any) -> str:
    text = json.dumps(cursor)
    return text if len(text) <= 60 else f"{text[:57]}..."


def _snoozes_counted(worker: Worker, claim: Claim, attempt: Attempt,
                     checkpoints: Checkpoints) -> Attempt:
    """A snooze with the job's earlier ones counted (its checkpoint, read once); a
    checkpoint that cannot be read fails the job, saying why, rather than snoozing
    it for ever."""
    try:
        return replace(attempt, snoozes=checkpoints.value.snoozes)
    except Exception as e:
        logger.exception("Could not read the checkpoint of job %s #%s", claim.name, claim.id)
        return Attempt(Ending.FAIL, f"{attempt.error}\n\nNot snoozed: its checkpoint could "
                                    f"not be read ({type(e).__name__}: {e})")


def _unless_cancelled(worker: Worker, claim: Claim, decision: Decision) -> Decision:
    """A retry of a job cancelled while it ran is not made (see rules.cancelled_instead);
    the store is asked only on the way to a retry, which is rare."""
    if decision.action is not Action.RELEASE:
        return decision
    try:
        asked = bool(worker.settler.patiently(lambda: worker.store.cancel_requested([claim])))
    except Exception:
        logger.exception("Could not look for a cancel of job %s #%s", claim.name, claim.id)
        return decision
    return rules.cancelled_instead(decision) if asked else decision


def after_settle(job: JobFunction, claim: Claim, decision: Decision) -> None:
    """Tell the job how its attempt was settled; what its hook raises is logged."""
    try:
        job.after_settle(claim, decision)
    except Exception:
        logger.exception("Job %s #%s: its after_settle hook raised", claim.name, claim.id)


def options_of(claim: Claim) -> JobOptions:
    """The options of a claimed job, for settling it without running it (the supervisor).

    A job unknown here, or a payload that does not decode, gets the defaults.
    """
    job = registry.find(claim.name)
    if job is None:
        return JobOptions()
    try:
        args, kwargs = payload.decode(claim.payload)
        return job.options_for(args, kwargs)
    except Exception:
        return JobOptions(tries=job.tries, backoff=job.backoff, timeout=job.timeout)


def _run(
    worker: Worker, job: JobFunction, claim: Claim, args: Any, kwargs: Any,
    options: JobOptions, watch: CancelWatch | None = None, tidy: bool = False,
    checkpoints: Checkpoints | None = None,
) -> Ran:
    """Tell the signals, run the job under its limit, and leave connections fit for use
    (as Django does around a request: before it, unless `tidy`, and after it)."""
    worker.tidied_after_job = False
    if job_started.receivers:
        tidy = False  # a receiver may have used a connection
        notify(job_started, job, **_about(claim))
    if job_lines.isEnabledFor(logging.INFO):
        job_lines.info("Job %s #%s started (attempt %d)", claim.name, claim.id,
                       claim.attempts, extra={"action": "job_started", **_logged(claim)})
    batch = marks_of(claim.payload).batch if '"batch":' in claim.payload else None
    cx = JobContext(id=claim.id, name=claim.name, queue=claim.queue,
                    attempt=claim.attempts, pushed_at=claim.pushed_at,
                    report_progress=partial(worker.progress.report, claim), cancel_watch=watch,
                    batch_id=None if batch is None else batch[0],
                    checkpoints=checkpoints or Checkpoints())
    scheduled = payload.schedule_of(claim.payload)
    if scheduled is not None:
        cx = replace(cx, schedule=scheduled[0], scheduled_at=scheduled[1])
    try:
        if worker.manage_connections and not tidy:
            close_old_connections()
    except Exception as e:
        return Ran(error=e)
    worker.monitor.start(claim, options.timeout)
    worker.in_job = True
    lookout = worker.lookout
    if watch is not None:
        lookout.current = (claim, watch, time.monotonic())
    try:
        ran = run_job(job, args, kwargs, cx, options.timeout)
    finally:
        lookout.current = None
        worker.in_job = False
        worker.progress.forget(claim)
    try:
        if worker.manage_connections:
            close_old_connections()  # never in place of the job's outcome
            worker.tidied_after_job = True
    except Exception:
        logger.exception("Could not tidy the connections after job %s", claim.id)
    return ran


def ending_of(ran: Ran, options: JobOptions) -> Attempt:
    """Describe how a run ended, for the rules."""
    error = ran.error
    if time_limit_passed(ran):
        text = rules.timeout_reason(options.timeout)
        if error is not None:
            text = f"{text}\n\n{_traceback(error)}"
        return Attempt(Ending.TIMED_OUT, text)
    if error is None:
        return Attempt(Ending.SUCCEEDED)
    if isinstance(error, Retry):
        return Attempt(Ending.RETRY, f"Retry: {error.message}" if error.message else "Retry",
                       delay=error.delay)
    if isinstance(error, Fail):
        return Attempt(Ending.FAIL, f"Fail: {error.message}" if error.message else "Fail")
    if isinstance(error, Snooze):
        return Attempt(Ending.SNOOZED, f"Snooze: {error}", delay=error.seconds)
    return Attempt(Ending.RAISED, describe(error))


def describe(error: BaseException) -> str:
    """First line: the exception and its message; then the traceback from the job's
    own first frame, without the worker's frames (and asyncio's, for an async job)
    that called it."""
    kind = f"{type(error).__module__}.{type(error).__qualname__}".removeprefix("builtins.")
    return f"{kind}: {error}\n\n{_traceback(error)}"


def _traceback(error: BaseException) -> str:
    """The traceback of `error` without the calling frames `describe` leaves off
    (all of them kept if the error arose in those frames alone)."""
    tb = error.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename.startswith(_PLUMBING):
        tb = tb.tb_next
    return "".join(traceback.format_exception(type(error), error, tb or error.__traceback__))


def _about(claim: Claim) -> dict[str, Any]:
    return {"id": claim.id, "name": claim.name, "queue": claim.queue,
            "attempts": claim.attempts}


def _logged(claim: Claim) -> dict[str, Any]:
    # LogRecord reserves "name": log the job's name as "job".
    return {"job_id": claim.id, "job": claim.name, "queue": claim.queue,
            "attempts": claim.attempts}


def _log(claim: Claim, settled: str, duration: float, decision: Any = None) -> None:
    """One line per attempt's end: a failure and a retry say why, a retry says when."""
    if settled in (Settled.SUCCEEDED, Settled.RETURNED) and not job_lines.isEnabledFor(
            logging.INFO):
        return  # the end of every job: no record to build when no one hears it
    error = decision.error.split("\n", 1)[0] if decision is not None else ""
    extra = {"action": f"job_{settled}", "duration": duration, "error": error,
             **_logged(claim)}
    if settled == Settled.LOST:
        logger.warning("Job %s #%s finished but its claim was lost; not settling it again",
                       claim.name, claim.id, extra={"action": "claim_lost", **_logged(claim)})
    if settled == Settled.RETRYING:
        delay = decision.delay or 0.0
        logger.info("Job %s #%s attempt %d failed: %s; retrying in %s", claim.name, claim.id,
                    claim.attempts, error, for_humans(delay), extra={**extra, "delay": delay})
    elif settled == Settled.FAILED:
        tries = f"{claim.attempts} attempt{'s' if claim.attempts != 1 else ''}"
        logger.warning("Job %s #%s failed after %s: %s", claim.name, claim.id, tries, error,
                       extra=extra)
    elif settled == Settled.SNOOZED:
        logger.info("Job %s #%s snoozed; back in %s, its tries unchanged", claim.name,
                       claim.id, for_humans(decision.delay or 0.0),
                       extra={**extra, "delay": decision.delay})
    elif settled == Settled.RETURNED:
        job_lines.info("Job %s #%s returned to its queue, not counted as an attempt",
                       claim.name, claim.id, extra=extra)
    else:
        job_lines.info("Job %s #%s %s in %.3f s", claim.name, claim.id, settled, duration,
                       extra=extra)


def for_humans(seconds: float) -> str:
    """A delay as a person reads it: 0.5 s, 30 s, 2 min 5 s, 3 h 20 min, 2 d 4 h."""
    if seconds < 60:
        return f"{round(seconds, 1):g} s"
    whole = round(seconds)
    for unit, size, small, small_size in (("d", 86400, "h", 3600), ("h", 3600, "min", 60),
                                          ("min", 60, "s", 1)):
        if whole >= size:
            big, rest = divmod(whole, size)
            rest //= small_size
            return f"{big} {unit} {rest} {small}" if rest else f"{big} {unit}"
    return f"{whole} s"  # pragma: no cover - 60 s and more is in minutes
