"""The rule book (`laterite_django.core.rules`) as tables of plain values.

Every public function of the rule book is called directly, with a `Claim` built
as a plain dataclass and a fixed clock: no store, no database, no worker.

- `after_attempt`: every `Ending` (succeeded, raised, Retry with and without a
  delay, Fail, timed out, lost, stopped at a shutdown, never started, unrunnable
  (an unknown job, a payload that does not decode), cancelled while it ran); with
  tries left, on the last try and past it, with tries not charged (`uncounted`);
  `tries=0`; the retry window (`retry_until`) open, passed, and passed by the
  next attempt only; every kind of backoff (the default, a number, a list, a
  callable) and backoffs or Retry delays that are refused (one that raises, a
  negative, infinite, NaN, non-number or too long delay); a snooze, within and past
  its `max_snoozes`, and with a refused delay.
- `before_run`: a job to run, a cancelled batch, a cancel asked while an earlier
  claim ran (`Claim.cancel_requested`), a lost claim past its tries, at them,
  inside or past its retry window, with `tries=0`, and a claim released for a
  retry (not lost) past its tries; with a given and with the real clock. An
  unknown job or a payload that does not decode is not `before_run`'s to decide:
  the worker describes it as an `Ending.UNRUNNABLE` attempt, in `after_attempt`'s
  table.
- `cancelled_instead`, `is_lost`, `lost_reason` and `timeout_reason`.

Each row names its inputs and the whole `Decision` (or value) expected, as the
rules decide today. The queue_work tests (test_worker_rules.py and others) check
the same rules through real workers on every store.
"""

from __future__ import annotations

import dataclasses
import inspect
import math
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from laterite_django.core import rules
from laterite_django.core.rules import (
    LOST,
    Action,
    Attempt,
    Decision,
    Ending,
    JobOptions,
    after_attempt,
    before_run,
    cancelled_instead,
    is_lost,
    lost_reason,
    timeout_reason,
)
from laterite_django.stores import Claim

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
OPEN = NOW + timedelta(hours=1)  # a retry window still open
PASSED = NOW - timedelta(hours=1)  # a retry window already passed
TEN_YEARS = 315_360_000.0  # the longest delay the rules accept

LOST_TEXT = "worker lost: its claim expired after 30 s without a heartbeat"
RAISED = "ValueError: boom"
CANCELLED = "Cancelled: while it ran"
SNOOZED = "Snooze: 30 s"
UNKNOWN = "unknown job: No job is named 'tests.j'. Registered jobs: none."


def claim(attempts: int = 1, *, uncounted: int = 0, retry_until: datetime | None = None,
          last_error: str = "", cancel_requested: bool = False) -> Claim:
    """Return a claim of job `j` as a store would hand it, for its `attempts`-th claim."""
    return Claim(
        id=1, name="tests.j", queue="default", payload='{"args": [], "kwargs": {}}',
        attempts=attempts, pushed_at=NOW - timedelta(minutes=5), token="token",
        retry_until=retry_until, last_error=last_error, uncounted=uncounted,
        cancel_requested=cancel_requested,
    )


def release(error: str, delay: float) -> Decision:
    """Return the decision to release the job for a retry `delay` seconds after NOW."""
    return Decision(Action.RELEASE, error, at=NOW + timedelta(seconds=delay), delay=delay)


def snooze(delay: float) -> Decision:
    """Return the decision to snooze the job `delay` seconds after NOW."""
    return Decision(Action.SNOOZE, SNOOZED, at=NOW + timedelta(seconds=delay), delay=delay)


def fail(error: str) -> Decision:
    """Return the decision to move the job to the failed list with `error`."""
    return Decision(Action.FAIL, error)


def backoff_failed(error: str, why: str) -> Decision:
    """Return the failure of a job whose backoff failed, `why` naming the refusal."""
    return fail(f"{error}\n\nNot retried: the backoff failed ({why})")


def delay_refused(error: str, why: str) -> Decision:
    """Return the failure of a job whose Retry delay was refused, `why` naming it."""
    return fail(f"{error}\n\nNot retried: its Retry delay was refused ({why})")


def row(id: str, *values: Any) -> Any:
    """Return one row of a table, named `id`."""
    return pytest.param(*values, id=id)


def raising(attempt: int) -> float:
    """A backoff callable that raises."""
    raise ZeroDivisionError("no delay for you")


def returning(value: Any) -> Any:
    """Return a backoff callable that returns `value`, whatever the attempt."""
    return lambda attempt: value


# after_attempt: (options, claim, attempt, expected decision)
AFTER_ATTEMPT = [
    # Succeeded, whatever the tries.
    row("succeeded-deletes", JobOptions(), claim(),
        Attempt(Ending.SUCCEEDED), Decision(Action.DELETE)),
    row("succeeded-past-tries-deletes", JobOptions(tries=1), claim(5),
        Attempt(Ending.SUCCEEDED), Decision(Action.DELETE)),
    # Raised: retried with the default backoff (10 s, doubling, capped) while tries are left.
    row("raised-try-1-of-3-default-backoff-10s", JobOptions(), claim(1),
        Attempt(Ending.RAISED, RAISED), release(RAISED, 10.0)),
    row("raised-try-2-of-3-default-backoff-20s", JobOptions(), claim(2),
        Attempt(Ending.RAISED, RAISED), release(RAISED, 20.0)),
    row("raised-last-try-fails", JobOptions(), claim(3),
        Attempt(Ending.RAISED, RAISED), fail(RAISED)),
    row("raised-past-tries-fails", JobOptions(), claim(4),
        Attempt(Ending.RAISED, RAISED), fail(RAISED)),
    row("raised-tries-1-fails-at-once", JobOptions(tries=1), claim(1),
        Attempt(Ending.RAISED, RAISED), fail(RAISED)),
    row("raised-uncounted-claims-leave-a-try", JobOptions(), claim(3, uncounted=1),
        Attempt(Ending.RAISED, RAISED), release(RAISED, 20.0)),
    row("raised-uncounted-claims-not-charged-backoff", JobOptions(tries=5), claim(4, uncounted=2),
        Attempt(Ending.RAISED, RAISED), release(RAISED, 20.0)),
    row("raised-default-backoff-capped-2560s", JobOptions(tries=20), claim(12),
        Attempt(Ending.RAISED, RAISED), release(RAISED, 2560.0)),
    # Other backoffs.
    row("raised-number-backoff", JobOptions(backoff=5), claim(2),
        Attempt(Ending.RAISED, RAISED), release(RAISED, 5.0)),
    row("raised-zero-backoff", JobOptions(backoff=0), claim(1),
        Attempt(Ending.RAISED, RAISED), release(RAISED, 0.0)),
    row("raised-list-backoff-first-entry", JobOptions(tries=5, backoff=[1, 5]), claim(1),
        Attempt(Ending.RAISED, RAISED), release(RAISED, 1.0)),
    row("raised-list-backoff-last-entry-repeats", JobOptions(tries=5, backoff=[1, 5]), claim(4),
        Attempt(Ending.RAISED, RAISED), release(RAISED, 5.0)),
    row("raised-callable-backoff-gets-tries-used", JobOptions(backoff=lambda n: n * 7.0),
        claim(3, uncounted=1), Attempt(Ending.RAISED, RAISED), release(RAISED, 14.0)),
    # A callable's answer is refused as a Retry delay would be: not seconds, not taken.
    row("raised-callable-backoff-negative-fails", JobOptions(backoff=returning(-5)), claim(1),
        Attempt(Ending.RAISED, RAISED),
        backoff_failed(RAISED, "ValueError: backoff must be >= 0 seconds, got -5")),
    row("raised-callable-backoff-numeric-string-fails", JobOptions(backoff=returning("5")),
        claim(1), Attempt(Ending.RAISED, RAISED),
        backoff_failed(RAISED, "ValueError: backoff must be a finite number of seconds, "
                               "got '5'")),
    row("raised-callable-backoff-true-fails", JobOptions(backoff=returning(True)), claim(1),
        Attempt(Ending.RAISED, RAISED),
        backoff_failed(RAISED, "ValueError: backoff must be a finite number of seconds, "
                               "got True")),
    row("raised-callable-backoff-nan-fails", JobOptions(backoff=returning(math.nan)), claim(1),
        Attempt(Ending.RAISED, RAISED),
        backoff_failed(RAISED, "ValueError: backoff must be a finite number of seconds, "
                               "got nan")),
    row("raised-callable-backoff-ten-years-accepted", JobOptions(backoff=returning(TEN_YEARS)),
        claim(1), Attempt(Ending.RAISED, RAISED), release(RAISED, TEN_YEARS)),
    # Backoffs that are refused: the job fails, saying why, tries left or not.
    row("raised-backoff-raises-fails", JobOptions(backoff=raising), claim(1),
        Attempt(Ending.RAISED, RAISED),
        backoff_failed(RAISED, "ZeroDivisionError: no delay for you")),
    # On the last try with no window no delay is asked: nothing to say of the backoff.
    row("raised-backoff-raises-on-last-try-not-asked", JobOptions(backoff=raising), claim(3),
        Attempt(Ending.RAISED, RAISED), fail(RAISED)),
    row("raised-backoff-not-a-number-fails", JobOptions(backoff=returning("soon")), claim(1),
        Attempt(Ending.RAISED, RAISED),
        backoff_failed(RAISED, "ValueError: backoff must be a finite number of seconds, "
                               "got 'soon'")),
    row("raised-backoff-infinite-fails", JobOptions(backoff=returning(math.inf)), claim(1),
        Attempt(Ending.RAISED, RAISED),
        backoff_failed(RAISED, "ValueError: backoff must be a finite number of seconds, got inf")),
    row("raised-backoff-beyond-ten-years-fails", JobOptions(backoff=returning(4e8)), claim(1),
        Attempt(Ending.RAISED, RAISED),
        backoff_failed(RAISED, "ValueError: backoff of 4e+08 s is beyond 3.1536e+08 s (10 years)")),
    row("raised-number-backoff-negative-fails", JobOptions(backoff=-1), claim(1),
        Attempt(Ending.RAISED, RAISED),
        backoff_failed(RAISED, "ValueError: backoff must be >= 0 seconds, got -1.0")),
    # tries=0: as many tries as the retry window allows; with no window, no end.
    row("raised-tries-0-no-window-always-released", JobOptions(tries=0), claim(100),
        Attempt(Ending.RAISED, RAISED), release(RAISED, 2560.0)),
    row("raised-tries-0-window-open-released", JobOptions(tries=0), claim(7, retry_until=OPEN),
        Attempt(Ending.RAISED, RAISED), release(RAISED, 640.0)),
    row("raised-tries-0-window-passed-fails", JobOptions(tries=0), claim(1, retry_until=PASSED),
        Attempt(Ending.RAISED, RAISED), fail(RAISED)),
    # The retry window: retried past the tries while the next attempt falls inside it.
    row("raised-past-tries-window-open-released", JobOptions(), claim(3, retry_until=OPEN),
        Attempt(Ending.RAISED, RAISED), release(RAISED, 40.0)),
    row("raised-past-tries-next-attempt-at-window-end-released", JobOptions(backoff=60),
        claim(3, retry_until=NOW + timedelta(seconds=60)),
        Attempt(Ending.RAISED, RAISED), release(RAISED, 60.0)),
    row("raised-past-tries-next-attempt-after-window-fails", JobOptions(backoff=61),
        claim(3, retry_until=NOW + timedelta(seconds=60)),
        Attempt(Ending.RAISED, RAISED), fail(RAISED)),
    row("raised-past-tries-window-passed-fails", JobOptions(), claim(3, retry_until=PASSED),
        Attempt(Ending.RAISED, RAISED), fail(RAISED)),
    row("raised-tries-left-window-passed-released", JobOptions(), claim(1, retry_until=PASSED),
        Attempt(Ending.RAISED, RAISED), release(RAISED, 10.0)),
    # Retry(message, delay): its delay instead of the backoff, under the same tries and window.
    row("retry-no-delay-uses-backoff", JobOptions(backoff=[3, 4]), claim(2),
        Attempt(Ending.RETRY, "Retry: later"), release("Retry: later", 4.0)),
    row("retry-delay-over-backoff", JobOptions(backoff=5), claim(1),
        Attempt(Ending.RETRY, "Retry: later", delay=30), release("Retry: later", 30.0)),
    row("retry-delay-zero", JobOptions(), claim(1),
        Attempt(Ending.RETRY, "Retry", delay=0), release("Retry", 0.0)),
    row("retry-on-last-try-fails", JobOptions(), claim(3),
        Attempt(Ending.RETRY, "Retry: later", delay=30), fail("Retry: later")),
    row("retry-past-tries-window-open-released", JobOptions(), claim(3, retry_until=OPEN),
        Attempt(Ending.RETRY, "Retry", delay=600), release("Retry", 600.0)),
    row("retry-delay-beyond-window-fails", JobOptions(), claim(3, retry_until=OPEN),
        Attempt(Ending.RETRY, "Retry", delay=7200), fail("Retry")),
    row("retry-delay-negative-fails", JobOptions(), claim(1),
        Attempt(Ending.RETRY, "Retry", delay=-1),
        delay_refused("Retry", "ValueError: Retry delay must be >= 0 seconds, got -1")),
    row("retry-delay-bool-fails", JobOptions(), claim(1),
        Attempt(Ending.RETRY, "Retry", delay=True),
        delay_refused("Retry",
                      "ValueError: Retry delay must be a finite number of seconds, got True")),
    row("retry-delay-nan-fails", JobOptions(), claim(1),
        Attempt(Ending.RETRY, "Retry", delay=math.nan),
        delay_refused("Retry",
                      "ValueError: Retry delay must be a finite number of seconds, got nan")),
    row("retry-delay-beyond-ten-years-fails", JobOptions(), claim(1),
        Attempt(Ending.RETRY, "Retry", delay=4e8),
        delay_refused("Retry",
                      "ValueError: Retry delay of 4e+08 s is beyond 3.1536e+08 s (10 years)")),
    # Fail(message): the failed list now, whatever tries or window remain.
    row("fail-with-tries-left-fails", JobOptions(tries=10), claim(1),
        Attempt(Ending.FAIL, "Fail: no"), fail("Fail: no")),
    row("fail-in-window-fails", JobOptions(tries=0), claim(1, retry_until=OPEN),
        Attempt(Ending.FAIL, "Fail"), fail("Fail")),
    # Timed out: a failed attempt like any other.
    row("timed-out-tries-left-released", JobOptions(timeout=5), claim(1),
        Attempt(Ending.TIMED_OUT, "JobTimeout: timed out after 5 s"),
        release("JobTimeout: timed out after 5 s", 10.0)),
    row("timed-out-last-try-fails", JobOptions(timeout=5), claim(3),
        Attempt(Ending.TIMED_OUT, "JobTimeout: timed out after 5 s"),
        fail("JobTimeout: timed out after 5 s")),
    row("timed-out-past-tries-window-open-released", JobOptions(), claim(3, retry_until=OPEN),
        Attempt(Ending.TIMED_OUT, "JobTimeout: timed out"),
        release("JobTimeout: timed out", 40.0)),
    # Lost: its worker died while it ran; charged a try.
    row("lost-tries-left-released", JobOptions(), claim(1),
        Attempt(Ending.LOST, "worker lost: its process 42 died while running it"),
        release("worker lost: its process 42 died while running it", 10.0)),
    row("lost-last-try-fails", JobOptions(), claim(3),
        Attempt(Ending.LOST, "worker lost: its process 42 died while running it"),
        fail("worker lost: its process 42 died while running it")),
    row("lost-past-tries-window-open-released", JobOptions(backoff=1), claim(3, retry_until=OPEN),
        Attempt(Ending.LOST, "worker lost"), release("worker lost", 1.0)),
    # Stopped at a shutdown, or never started: given back, the claim's own error kept.
    row("stopped-given-back", JobOptions(), claim(1, last_error=RAISED),
        Attempt(Ending.STOPPED), Decision(Action.GIVE_BACK, RAISED)),
    row("stopped-on-last-try-given-back", JobOptions(), claim(3),
        Attempt(Ending.STOPPED, "ignored"), Decision(Action.GIVE_BACK, "")),
    row("unstarted-given-back-not-started", JobOptions(), claim(2, last_error=LOST_TEXT),
        Attempt(Ending.UNSTARTED), Decision(Action.GIVE_BACK, LOST_TEXT, started=False)),
    row("unstarted-past-tries-given-back", JobOptions(tries=1), claim(4),
        Attempt(Ending.UNSTARTED), Decision(Action.GIVE_BACK, "", started=False)),
    # Unrunnable: failed at once, tries or not.
    row("unrunnable-unknown-job-fails", JobOptions(), claim(1),
        Attempt(Ending.UNRUNNABLE, UNKNOWN), fail(UNKNOWN)),
    row("unrunnable-bad-payload-fails", JobOptions(), claim(1, retry_until=OPEN),
        Attempt(Ending.UNRUNNABLE, "payload does not decode: Expecting value"),
        fail("payload does not decode: Expecting value")),
    # Cancelled while it ran: failed, never retried by itself.
    row("cancelled-tries-left-fails", JobOptions(), claim(1),
        Attempt(Ending.CANCELLED, f"{CANCELLED}\n\n"), fail(f"{CANCELLED}\n\n")),
    row("cancelled-window-open-fails", JobOptions(tries=0), claim(1, retry_until=OPEN),
        Attempt(Ending.CANCELLED, CANCELLED), fail(CANCELLED)),
    # Snoozed: back after its delay, no try charged, on its last try too; past its
    # max_snoozes (default 100; 0: no ceiling) it fails saying so; a bad delay fails it.
    row("snoozed-waits-its-delay", JobOptions(), claim(1),
        Attempt(Ending.SNOOZED, SNOOZED, delay=30), snooze(30.0)),
    row("snoozed-on-its-last-try", JobOptions(tries=1), claim(1),
        Attempt(Ending.SNOOZED, SNOOZED, delay=30, snoozes=99), snooze(30.0)),
    row("snoozed-past-its-tries", JobOptions(tries=1), claim(7, uncounted=6),
        Attempt(Ending.SNOOZED, SNOOZED, delay=0), snooze(0.0)),
    row("snoozed-at-max-fails", JobOptions(), claim(1),
        Attempt(Ending.SNOOZED, SNOOZED, delay=30, snoozes=100),
        fail(f"{SNOOZED}\n\nNot snoozed again: snoozed 100 times, its max_snoozes (100)")),
    row("snoozed-own-max-fails", JobOptions(max_snoozes=2), claim(1),
        Attempt(Ending.SNOOZED, SNOOZED, delay=30, snoozes=2),
        fail(f"{SNOOZED}\n\nNot snoozed again: snoozed 2 times, its max_snoozes (2)")),
    row("snoozed-no-ceiling", JobOptions(max_snoozes=0), claim(1),
        Attempt(Ending.SNOOZED, SNOOZED, delay=30, snoozes=10_000), snooze(30.0)),
    row("snoozed-negative-fails", JobOptions(), claim(1),
        Attempt(Ending.SNOOZED, SNOOZED, delay=-1),
        fail(f"{SNOOZED}\n\nNot snoozed: its delay was refused (ValueError: Snooze delay "
             f"must be >= 0 seconds, got -1)")),
    row("snoozed-nan-fails", JobOptions(), claim(1),
        Attempt(Ending.SNOOZED, SNOOZED, delay=math.nan),
        fail(f"{SNOOZED}\n\nNot snoozed: its delay was refused (ValueError: Snooze delay "
             f"must be a finite number of seconds, got nan)")),
    row("snoozed-too-long-fails", JobOptions(), claim(1),
        Attempt(Ending.SNOOZED, SNOOZED, delay=TEN_YEARS * 2),
        fail(f"{SNOOZED}\n\nNot snoozed: its delay was refused (ValueError: Snooze delay "
             f"of 6.3072e+08 s is beyond 3.1536e+08 s (10 years))")),
]


@pytest.mark.parametrize(("options", "claimed", "attempt", "expected"), AFTER_ATTEMPT)
def test_after_attempt(options: JobOptions, claimed: Claim, attempt: Attempt,
                       expected: Decision) -> None:
    assert after_attempt(claimed, options, attempt, NOW) == expected


# before_run: (claim, options, now (None: the real clock), batch cancelled, expected)
BEFORE_RUN = [
    row("first-claim-runs", claim(1), JobOptions(), NOW, False, None),
    row("released-retry-past-tries-runs", claim(5, last_error=RAISED), JobOptions(), NOW, False,
        None),
    row("batch-cancelled-deleted", claim(1), JobOptions(), NOW, True,
        Decision(Action.DELETE, "its batch was cancelled")),
    row("batch-cancelled-before-cancel-asked", claim(2, cancel_requested=True), JobOptions(), NOW,
        True, Decision(Action.DELETE, "its batch was cancelled")),
    row("cancel-asked-fails", claim(2, cancel_requested=True), JobOptions(), NOW, False,
        fail(CANCELLED)),
    row("cancel-asked-keeps-last-error", claim(2, last_error=LOST_TEXT, cancel_requested=True),
        JobOptions(), NOW, False, fail(f"{CANCELLED}\n\n{LOST_TEXT}")),
    row("cancel-asked-window-open-fails", claim(1, retry_until=OPEN, cancel_requested=True),
        JobOptions(tries=0), NOW, False, fail(CANCELLED)),
    row("lost-past-tries-fails", claim(4, last_error=LOST_TEXT), JobOptions(), NOW, False,
        fail(f"{LOST_TEXT}; no tries left (3)")),
    row("lost-at-last-try-runs", claim(3, last_error=LOST_TEXT), JobOptions(), NOW, False, None),
    row("lost-past-tries-but-uncounted-runs", claim(4, uncounted=1, last_error=LOST_TEXT),
        JobOptions(), NOW, False, None),
    row("lost-past-tries-window-open-runs", claim(4, retry_until=OPEN, last_error=LOST_TEXT),
        JobOptions(), NOW, False, None),
    row("lost-past-tries-window-ends-now-runs", claim(4, retry_until=NOW, last_error=LOST_TEXT),
        JobOptions(), NOW, False, None),
    row("lost-past-tries-window-passed-fails", claim(4, retry_until=PASSED, last_error=LOST_TEXT),
        JobOptions(), NOW, False, fail(f"{LOST_TEXT}; no tries left (3)")),
    row("lost-tries-0-runs", claim(50, last_error=LOST_TEXT), JobOptions(tries=0), NOW, False,
        None),
    row("lost-tries-0-window-passed-fails", claim(50, retry_until=PASSED, last_error=LOST_TEXT),
        JobOptions(tries=0), NOW, False,
        fail(f"{LOST_TEXT}; its retry window has passed ({PASSED.isoformat()})")),
    row("lost-tries-0-window-open-runs", claim(50, retry_until=OPEN, last_error=LOST_TEXT),
        JobOptions(tries=0), NOW, False, None),
    row("lost-mentioned-not-first-runs", claim(9, last_error=f"ValueError: {LOST}"),
        JobOptions(), NOW, False, None),
    row("real-clock-window-passed-fails",
        claim(4, retry_until=datetime(2000, 1, 1, tzinfo=UTC), last_error=LOST_TEXT),
        JobOptions(), None, False, fail(f"{LOST_TEXT}; no tries left (3)")),
    row("real-clock-window-open-runs",
        claim(4, retry_until=datetime(2999, 1, 1, tzinfo=UTC), last_error=LOST_TEXT),
        JobOptions(), None, False, None),
]


@pytest.mark.parametrize(("claimed", "options", "now", "batch_cancelled", "expected"),
                         BEFORE_RUN)
def test_before_run(claimed: Claim, options: JobOptions, now: datetime | None,
                    batch_cancelled: bool, expected: Decision | None) -> None:
    assert before_run(claimed, options, now, batch_cancelled=batch_cancelled) == expected


# cancelled_instead: (decision, expected)
CANCELLED_INSTEAD = [
    row("release-becomes-fail", release(RAISED, 10.0), fail(f"{CANCELLED}\n\n{RAISED}")),
    row("fail-unchanged", fail(RAISED), fail(RAISED)),
    row("delete-unchanged", Decision(Action.DELETE), Decision(Action.DELETE)),
    row("give-back-unchanged", Decision(Action.GIVE_BACK, "", started=False),
        Decision(Action.GIVE_BACK, "", started=False)),
]


@pytest.mark.parametrize(("decision", "expected"), CANCELLED_INSTEAD)
def test_cancelled_instead(decision: Decision, expected: Decision) -> None:
    assert cancelled_instead(decision) == expected


# is_lost: (claim, expected)
IS_LOST = [
    row("swept-claim-lost", claim(2, last_error=LOST_TEXT), True),
    row("supervisor-lost-claim-lost",
        claim(2, last_error=f"{LOST}: its process 42 died while running it"), True),
    row("no-error-not-lost", claim(2), False),
    row("raised-not-lost", claim(2, last_error=RAISED), False),
    row("lost-mentioned-later-not-lost", claim(2, last_error=f"ValueError: {LOST}"), False),
]


@pytest.mark.parametrize(("claimed", "expected"), IS_LOST)
def test_is_lost(claimed: Claim, expected: bool) -> None:
    assert is_lost(claimed) is expected


# lost_reason: (retry_after, expected)
LOST_REASON = [
    row("whole-seconds", 30, LOST_TEXT),
    row("float-seconds", 30.0, LOST_TEXT),
    row("fraction", 0.5, "worker lost: its claim expired after 0.5 s without a heartbeat"),
]


@pytest.mark.parametrize(("retry_after", "expected"), LOST_REASON)
def test_lost_reason(retry_after: float, expected: str) -> None:
    assert lost_reason(retry_after) == expected


# timeout_reason: (timeout, expected)
TIMEOUT_REASON = [
    row("seconds", 60, "JobTimeout: timed out after 60 s"),
    row("fraction", 1.5, "JobTimeout: timed out after 1.5 s"),
    row("no-limit", None, "JobTimeout: timed out"),
    row("zero", 0, "JobTimeout: timed out"),
]


@pytest.mark.parametrize(("seconds", "expected"), TIMEOUT_REASON)
def test_timeout_reason(seconds: float | None, expected: str) -> None:
    assert timeout_reason(seconds) == expected


TABLES = {
    "after_attempt": AFTER_ATTEMPT,
    "before_run": BEFORE_RUN,
    "cancelled_instead": CANCELLED_INSTEAD,
    "is_lost": IS_LOST,
    "lost_reason": LOST_REASON,
    "timeout_reason": TIMEOUT_REASON,
}


def values_in(value: Any) -> Iterator[Any]:
    """Yield `value` and every value inside it: a row, a tuple, a list, a dataclass."""
    yield value
    if isinstance(value, tuple | list):
        for item in value:
            yield from values_in(item)
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for field in dataclasses.fields(value):
            yield from values_in(getattr(value, field.name))


def test_every_public_function_has_a_table() -> None:
    functions = {name for name in rules.__all__ if inspect.isfunction(getattr(rules, name))}
    assert functions == set(TABLES)
    assert all(TABLES.values())


def test_every_public_value_is_in_a_row() -> None:
    seen = [v for table in TABLES.values() for param in table for v in values_in(param.values)]
    for name in rules.__all__:
        public = getattr(rules, name)
        if inspect.isfunction(public):
            continue
        if isinstance(public, type):
            assert any(isinstance(v, public) for v in seen), name
        else:
            assert any(isinstance(v, str) and public in v for v in seen), name


def test_every_ending_and_action_is_in_a_row() -> None:
    endings = {param.values[2].ending for param in AFTER_ATTEMPT}
    assert endings == set(Ending)
    decided = {param.values[-1].action for table in (AFTER_ATTEMPT, BEFORE_RUN)
               for param in table if param.values[-1] is not None}
    assert decided == set(Action)
