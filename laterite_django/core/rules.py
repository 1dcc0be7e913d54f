"""The rule book: what happens to a claimed job, before it runs and after each attempt.

Every decision of the contract is made here and only here: tries, backoff, the
retry window, Retry, Fail and Snooze, timeouts, unrunnable jobs, lost workers and jobs
reclaimed past their tries. The worker, the process supervisor and the
`django.tasks` runner describe how an attempt ended (an `Attempt`) and act on
the `Decision` these functions return; none of them decides by itself.

Every claim that may have started is an attempt (`Claim.attempts`, the job's
`cx.attempt`), so two runs of a job never see the same number; tries and backoff
count `Claim.tries_used`: a job stopped at a shutdown, or lost behind the head of
its batch (it may never have started), is not charged a try. A claim the worker
knows it never started is given back with its attempt taken back.

What happens to a job that raised for the third time? `after_attempt()` with
`Ending.RAISED`: with `tries=3` and no retry window it is `Action.FAIL`.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.utils import timezone

from .backoff import Backoff, delay_after
from .cancel import reason as cancel_reason
from .sizes import MAX_DELAY
from .values import Claim

__all__ = [
    "LOST",
    "Action",
    "Attempt",
    "Decision",
    "Ending",
    "JobOptions",
    "after_attempt",
    "before_run",
    "cancelled_instead",
    "is_lost",
    "lost_reason",
    "timeout_reason",
]

# The reason a sweep writes on a claim whose worker stopped beating; a claim
# that carries it was lost, not released for a retry.
LOST = "worker lost"


class Ending(enum.Enum):
    """How one attempt ended."""

    SUCCEEDED = "succeeded"
    RAISED = "raised"  # any exception: a retry while tries allow
    RETRY = "retry"  # the job raised Retry(message, delay)
    FAIL = "fail"  # the job raised Fail(message): failed list now
    TIMED_OUT = "timed out"  # ran past its timeout (whatever the job caught)
    LOST = "lost"  # its worker died while running it
    STOPPED = "stopped"  # cut off by a shutdown: not charged a try
    UNSTARTED = "unstarted"  # claimed, never started (its worker died): not an attempt
    UNRUNNABLE = "unrunnable"  # unknown name, a payload that does not decode, bad options
    CANCELLED = "cancelled"  # cancelled while it ran: failed list, never retried by itself
    SNOOZED = "snoozed"  # the job raised Snooze(seconds): back later, no try charged


class Action(enum.Enum):
    """What to do with the job."""

    DELETE = "delete"  # it succeeded
    RELEASE = "release"  # back to its queue, due at `Decision.at`, the attempt counted
    GIVE_BACK = "give back"  # back to its queue, due now, not charged a try
    FAIL = "fail"  # to the failed list with `Decision.error`
    SNOOZE = "snooze"  # back to its queue after `Decision.delay`, not charged a try


@dataclass(frozen=True, slots=True)
class JobOptions:
    """The options the rules read: a job's own, or a django.tasks Task's."""

    tries: int = 3
    backoff: Backoff = None
    timeout: float | None = 60
    max_snoozes: int = 100  # 0: no ceiling


@dataclass(frozen=True, slots=True)
class Attempt:
    """How an attempt ended, with the error text and a delay asked by Retry."""

    ending: Ending
    error: str = ""
    delay: float | None = None
    snoozes: int = 0  # SNOOZED: the times the job was snoozed before this one


@dataclass(frozen=True, slots=True)
class Decision:
    """The rules' verdict: an action, the error to record, and when a release is due."""

    action: Action
    error: str = ""
    at: datetime | None = None
    delay: float | None = None  # seconds until `at`, for logs and signals
    # GIVE_BACK: whether the job started under this claim (its next run is then a new
    # attempt, not charged a try); one that never started has its attempt taken back.
    started: bool = True


def is_lost(claim: Claim) -> bool:
    """Whether this claim came back from a worker that stopped beating."""
    return claim.last_error.startswith(LOST)


def lost_reason(retry_after: float) -> str:
    """The reason the sweep records on a claim whose worker stopped beating."""
    return f"{LOST}: its claim expired after {retry_after:g} s without a heartbeat"


def timeout_reason(seconds: float | None) -> str:
    return f"JobTimeout: timed out after {seconds:g} s" if seconds else "JobTimeout: timed out"


def before_run(claim: Claim, options: JobOptions, now: datetime | None = None,
               *, batch_cancelled: bool = False) -> Decision | None:
    """Return a decision if the job must not run at all, else None.

    A job reclaimed after its worker died, already past its tries and outside
    its retry window, fails without running: it may be what kills its worker.
    (A job released for a retry was granted its next attempt when released.)
    A job of a cancelled batch is deleted without running (its end counted on
    the batch, not as a failure): a store that could not remove it at the cancel
    leaves it to the worker that claims it. A job whose cancel was asked while an
    earlier claim ran, and that came back to its queue all the same (its worker died,
    or released it as the cancel came), fails as cancelled without running again.
    """
    if batch_cancelled:
        return Decision(Action.DELETE, "its batch was cancelled")
    if claim.cancel_requested:
        why = f"\n\n{claim.last_error}" if claim.last_error else ""
        return Decision(Action.FAIL, f"{cancel_reason(True)}{why}")
    if not is_lost(claim):
        return None
    if (
        options.tries
        and claim.tries_used > options.tries
        and not _in_window(claim, now or timezone.now())
    ):
        return Decision(Action.FAIL, f"{claim.last_error}; no tries left ({options.tries})")
    if (
        not options.tries
        and claim.retry_until is not None
        and not _in_window(claim, now or timezone.now())
    ):  # tries=0: as many as the retry window allows, and it has passed
        return Decision(Action.FAIL, f"{claim.last_error}; its retry window has passed "
                                     f"({claim.retry_until.isoformat()})")
    return None


def after_attempt(
    claim: Claim, options: JobOptions, attempt: Attempt, now: datetime
) -> Decision:
    """Decide what happens to `claim` after `attempt`."""
    ending = attempt.ending
    if ending is Ending.SUCCEEDED:
        return Decision(Action.DELETE)
    if ending is Ending.STOPPED:
        return Decision(Action.GIVE_BACK, claim.last_error)
    if ending is Ending.UNSTARTED:
        return Decision(Action.GIVE_BACK, claim.last_error, started=False)
    if ending in (Ending.FAIL, Ending.UNRUNNABLE, Ending.CANCELLED):
        return Decision(Action.FAIL, attempt.error)
    if ending is Ending.SNOOZED:
        return _snooze(options, attempt, now)
    # RAISED, RETRY, TIMED_OUT, LOST: a failed attempt, retried while allowed.
    tries_left = (options.tries == 0 and claim.retry_until is None) or (
        bool(options.tries) and claim.tries_used < options.tries
    )
    if not tries_left and claim.retry_until is None:
        return Decision(Action.FAIL, attempt.error)  # no delay asked of the backoff
    try:
        delay = _delay(claim, options, attempt)
        next_at = now + timedelta(seconds=delay)
    except Exception as e:  # a backoff callable that raises, a delay out of range
        why = f"{type(e).__name__}: {e}"
        what = "its Retry delay was refused" if attempt.delay is not None else \
            "the backoff failed"
        return Decision(Action.FAIL, f"{attempt.error}\n\nNot retried: {what} ({why})")
    if tries_left or _in_window(claim, next_at):
        return Decision(Action.RELEASE, attempt.error, at=next_at, delay=delay)
    return Decision(Action.FAIL, attempt.error)


def cancelled_instead(decision: Decision) -> Decision:
    """A job whose cancel was asked while it ran is never retried by itself: a release
    becomes a fail, as cancelled (asked of a decision to release, when the store says
    a cancel is pending: the job may have ended before the worker first looked)."""
    if decision.action is not Action.RELEASE:
        return decision
    return Decision(Action.FAIL, f"{cancel_reason(True)}\n\n{decision.error}")


def _snooze(options: JobOptions, attempt: Attempt, now: datetime) -> Decision:
    """A snooze sends the job back after its delay without charging a try, up to
    `max_snoozes` times; the next one fails it, saying so."""
    if options.max_snoozes and attempt.snoozes >= options.max_snoozes:
        return Decision(Action.FAIL, f"{attempt.error}\n\nNot snoozed again: snoozed "
                                     f"{attempt.snoozes} times, its max_snoozes "
                                     f"({options.max_snoozes})")
    try:
        delay = _checked(attempt.delay or 0.0, "Snooze delay")
    except ValueError as e:
        return Decision(Action.FAIL, f"{attempt.error}\n\nNot snoozed: its delay was "
                                     f"refused (ValueError: {e})")
    return Decision(Action.SNOOZE, attempt.error, at=now + timedelta(seconds=delay),
                    delay=delay)


def _delay(claim: Claim, options: JobOptions, attempt: Attempt) -> float:
    """Seconds before the next attempt: Retry's own delay, else the backoff's."""
    if attempt.delay is not None:
        delay = attempt.delay
        source = "Retry delay"
    else:
        delay = delay_after(options.backoff, claim.tries_used)
        source = "backoff"
    return _checked(delay, source)


def _checked(delay: object, source: str) -> float:
    """`delay` as seconds, if it is a finite number from 0 to MAX_DELAY; else ValueError
    saying which (`source`: Retry delay, backoff, Snooze delay)."""
    if isinstance(delay, bool) or not isinstance(delay, int | float) or not math.isfinite(delay):
        raise ValueError(f"{source} must be a finite number of seconds, got {delay!r}")
    if delay < 0:
        raise ValueError(f"{source} must be >= 0 seconds, got {delay!r}")
    if delay > MAX_DELAY:
        raise ValueError(f"{source} of {delay:g} s is beyond {MAX_DELAY:g} s (10 years)")
    return float(delay)



def _in_window(claim: Claim, moment: datetime) -> bool:
    return claim.retry_until is not None and moment <= claim.retry_until
