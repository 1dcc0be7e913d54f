"""Jobs the test suite pushes; each records what it did in the `Record` table."""

from __future__ import annotations

import asyncio
import os
import time
from datetime import timedelta

from laterite_django import Fail, JobContext, Retry, Snooze, job

from .models import Record


def _record(kind: str, value: str = "", attempt: int = 0) -> None:
    Record.objects.create(kind=kind, value=value, attempt=attempt, pid=os.getpid())


@job("tests.noop")
def noop(i: int = 0) -> None:
    """Do nothing, fast (drain tests)."""


@job("tests.record")
def record(value: str, cx: JobContext) -> str:
    _record("record", value, cx.attempt)
    return value


@job("tests.callback")
def callback(value: str, cx: JobContext) -> None:
    """Record `value` with this job's id: a job run again (its worker killed after it
    ran, before it was settled) records the same id, one pushed twice another."""
    _record("callback", f"{value}#{cx.id}", cx.attempt)


@job("tests.left_in_store")
def left_in_store(i: int) -> None:
    """Record how many jobs of the default queue the store holds as this one starts
    (waiting, delayed and claimed: those of the batch not yet deleted among them)."""
    from laterite_django.stores import get_store

    counts = get_store().counts().get("default")
    _record("left", str(counts.total if counts else 0))


@job("tests.add")
def add(a: int, b: int) -> int:
    return a + b


@job("tests.backoff_flaky", tries=3, backoff=1)
def backoff_flaky(value: str, succeed_on: int, cx: JobContext) -> None:
    """Like `flaky`, retried after 1 s (queue_work --wait-delayed)."""
    _record("backoff-attempt", value, cx.attempt)
    if cx.attempt < succeed_on:
        raise RuntimeError(f"backoff attempt {cx.attempt}")
    _record("backoff-ok", value, cx.attempt)


@job("tests.flaky", tries=3, backoff=0)
def flaky(value: str, succeed_on: int, cx: JobContext) -> None:
    """Fail until attempt `succeed_on`, then record success."""
    _record("flaky-attempt", value, cx.attempt)
    if cx.attempt < succeed_on:
        raise RuntimeError(f"flaky attempt {cx.attempt}")
    _record("flaky-ok", value, cx.attempt)


@job("tests.retry_explicit", tries=2, backoff=[0])
def retry_explicit(value: str, delay: float | None, cx: JobContext) -> None:
    _record("retry-explicit", value, cx.attempt)
    if cx.attempt == 1:
        raise Retry("not yet", delay=delay)


@job("tests.fail_now", tries=5)
def fail_now(value: str, cx: JobContext) -> None:
    _record("fail-now", value, cx.attempt)
    raise Fail(f"no such thing: {value}")


@job("tests.always_broken", tries=2, backoff=0)
def always_broken(value: str, cx: JobContext) -> None:
    _record("broken", value, cx.attempt)
    raise ValueError(f"broken {value}")


@job("tests.windowed", tries=1, backoff=0.3, retry_until=timedelta(seconds=3))
def windowed(value: str, cx: JobContext) -> None:
    _record("windowed", value, cx.attempt)
    raise RuntimeError("still failing")


@job("tests.unlimited", tries=0, backoff=0)
def unlimited(value: str, succeed_on: int, cx: JobContext) -> None:
    _record("unlimited", value, cx.attempt)
    if cx.attempt < succeed_on:
        raise RuntimeError("again")


@job("tests.slow", timeout=0.5, tries=1)
def slow(seconds: float, cx: JobContext) -> None:
    _record("slow-start", str(seconds), cx.attempt)
    time.sleep(seconds)
    _record("slow-end", str(seconds), cx.attempt)


@job("tests.spin", timeout=0.5, tries=1)
def spin(cx: JobContext) -> None:
    _record("spin-start", "", cx.attempt)
    while True:
        pass


@job("tests.sleeper", timeout=None, tries=1)
def sleeper(seconds: float, value: str, cx: JobContext) -> None:
    """Record its start, sleep, record its end (signal and crash tests)."""
    _record("sleeper-start", value, cx.attempt)
    time.sleep(seconds)
    _record("sleeper-end", value, cx.attempt)


@job("tests.unique", unique_key=lambda user_id: f"user:{user_id}")
def unique(user_id: int) -> None:
    _record("unique", str(user_id))


@job("tests.async_record")
async def async_record(value: str, cx: JobContext) -> str:
    await asyncio.sleep(0)
    await Record.objects.acreate(kind="async", value=value, attempt=cx.attempt, pid=os.getpid())
    return value


@job("tests.async_broken", tries=1)
async def async_broken(value: str) -> None:
    await asyncio.sleep(0)
    raise ValueError(f"async broken {value}")


@job("tests.mail", queue="mail")
def mail(value: str) -> None:
    _record("mail", value)


@job("tests.low", queue="low")
def low(value: str) -> None:
    _record("low", value)


# -- process, signal and crash tests (tests/test_processes.py, test_chaos.py) ---------------


@job("tests.patient", timeout=None, tries=3, backoff=0)
def patient(seconds: float, value: str, cx: JobContext) -> None:
    """Like `sleeper`, with tries left: it runs again after its worker died."""
    _record("patient-start", value, cx.attempt)
    time.sleep(seconds)
    _record("patient-end", value, cx.attempt)


def _stuck_in_c(seconds: int, cx: JobContext) -> None:
    """Sleep in libc with signals blocked, as some C libraries do: no alarm or stop
    signal reaches the interpreter, so only the supervisor's kill ends it."""
    import ctypes
    import signal

    _record("stuck-start", str(seconds), cx.attempt)
    signal.pthread_sigmask(
        signal.SIG_BLOCK, set(signal.Signals) - {signal.SIGKILL, signal.SIGSTOP}
    )
    ctypes.CDLL(None).sleep(seconds)
    _record("stuck-end", str(seconds), cx.attempt)


@job("tests.stuck_in_c", timeout=0.5, tries=2, backoff=0)
def stuck_in_c(seconds: int, cx: JobContext) -> None:
    _stuck_in_c(seconds, cx)


@job("tests.stuck_untimed", timeout=None, tries=1)
def stuck_untimed(seconds: int, cx: JobContext) -> None:
    _stuck_in_c(seconds, cx)


_hoard: list[bytes] = []


@job("tests.hog")
def hog(megabytes: int) -> None:
    """Keep `megabytes` MB for the life of the process (memory recycling)."""
    _hoard.append(b"x" * (megabytes * 1024 * 1024))
    _record("hog", str(megabytes))


@job("tests.chaos", tries=25, backoff=0)
def chaos(i: int) -> None:
    """Record one run, taking a moment so that kills land mid-job."""
    time.sleep(0.004)
    _record("chaos", str(i))


@job("tests.sturdy", tries=10, backoff=0.2)
def sturdy(i: int) -> None:
    """Record one run; retried quickly if the database is away (restart tests)."""
    time.sleep(0.02)
    _record("sturdy", str(i))



# -- settling whatever a job or its options do (tests/test_settling.py) ---------------


def _broken_backoff(attempt: int) -> float:
    raise RuntimeError(f"no backoff for attempt {attempt}")


@job("tests.bad_backoff", tries=3, backoff=_broken_backoff)
def bad_backoff(value: str, cx: JobContext) -> None:
    _record("bad-backoff", value, cx.attempt)
    raise RuntimeError("try me again")


@job("tests.far_retry", tries=3)
def far_retry(value: str, cx: JobContext) -> None:
    _record("far-retry", value, cx.attempt)
    raise Retry("in a very long while", delay=1e12)


@job("tests.swallow_timeout", timeout=0.5, tries=1)
def swallow_timeout(seconds: float, cx: JobContext) -> str:
    """Catch everything, JobTimeout included, until `seconds` have passed; then return."""
    _record("swallow-start", "", cx.attempt)
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            time.sleep(0.05)
        except BaseException:  # the point of the job
            _record("swallowed", "", cx.attempt)
    _record("swallow-end", "", cx.attempt)
    return "returned"


@job("tests.async_blocked", timeout=0.5, tries=1)
async def async_blocked(seconds: float, cx: JobContext) -> None:
    from asgiref.sync import sync_to_async

    await Record.objects.acreate(kind="async-blocked-start", attempt=cx.attempt)
    await sync_to_async(time.sleep)(seconds)
    await Record.objects.acreate(kind="async-blocked-end", attempt=cx.attempt)


@job("tests.chaos_once", tries=1, backoff=0)
def chaos_once(i: int, seconds: float, cx: JobContext) -> None:
    """Record its start and end; with tries=1 a lost attempt that counted fails it.

    Its start is also a line appended to $LATERITE_TEST_STARTS at once: the start
    record may wait for the database's write lock, and a kill in that wait is a
    kill of a job that had started."""
    starts = os.environ.get("LATERITE_TEST_STARTS")
    if starts:
        fd = os.open(starts, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        try:
            os.write(fd, f"{i}\n".encode())
        finally:
            os.close(fd)
    _record("once-start", str(i), cx.attempt)
    time.sleep(seconds)
    _record("once-end", str(i), cx.attempt)


@job("tests.linger", timeout=None, tries=1, backoff=0)
def linger(value: str, cx: JobContext) -> None:
    """Record its start; the first run then lingers (for a test to kill its worker
    there), a later one ends at once. tries=1: a lost run that was charged fails it."""
    first = not Record.objects.filter(kind="linger-start", value=value).exists()
    _record("linger-start", value, cx.attempt)
    if first:
        time.sleep(60)


# -- web server tests (tests/test_worker_mode_servers.py) --------------------------------------


@job("tests.hold", timeout=None, tries=3, backoff=0)
def hold(value: str, path: str, nap: float, cx: JobContext) -> None:
    """Record its start; while `path` exists, sleep `nap` seconds at a time; record its end.

    A long nap is one C call that no exception raised from another thread can cut
    short; a short one comes back to the interpreter every `nap` seconds.
    """
    _record("hold-start", value, cx.attempt)
    while os.path.exists(path):
        time.sleep(nap)
    _record("hold-end", value, cx.attempt)


@job("tests.scheduled")
def scheduled(cx: JobContext, label: str = "") -> None:
    """Record the schedule and tick it was pushed for (cx.schedule, cx.scheduled_at)."""
    at = cx.scheduled_at.isoformat() if cx.scheduled_at else ""
    _record("scheduled", f"{cx.schedule}|{at}|{label}")


@job("tests.push_record")
def push_record(value: str) -> None:
    """Push `record(value)` (a job's own pushes carry its trace on)."""
    record.push(value)


@job("tests.progressing", timeout=None, tries=1)
def progressing(total: int, cx: JobContext) -> None:
    """Say it is at step 1 of `total`, then wait (30 s at most) for a "go" record."""
    cx.progress(1, total, "first step")
    deadline = time.monotonic() + 30
    while not Record.objects.filter(kind="go").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    cx.progress(total, total, "done")
    _record("progressed", str(total), cx.attempt)


# -- flow control (tests/flow/test_flow*.py) ------------------------------------------


def _stamp(kind: str, value: str) -> None:
    Record.objects.create(kind=kind, value=value, pid=os.getpid())


@job("tests.flow_stamp")
def flow_stamp(value: str, seconds: float = 0.05) -> None:
    """Record its start and end (the `at` of each Record), running `seconds` between."""
    _stamp("flow-start", value)
    time.sleep(seconds)
    _stamp("flow-end", value)


@job("tests.flow_coop", timeout=None)
def flow_coop(value: str, cx: JobContext) -> None:
    """Run until cancelled, looking at cx.cancelled; then record it and stop."""
    _stamp("coop-start", value)
    while not cx.cancelled:
        time.sleep(0.05)
    _stamp("coop-saw", value)
    cx.check()


@job("tests.flow_spin", timeout=None)
def flow_spin(value: str) -> None:
    """Never look at a cancel: only the interruption after the grace stops it."""
    _stamp("spin-start", value)
    while True:
        pass


@job("tests.flow_stuck", timeout=None, tries=3)
def flow_stuck(seconds: int, cx: JobContext) -> None:
    """Stuck in C, no time limit, tries left: only the supervisor's kill ends a cancel."""
    _stuck_in_c(seconds, cx)


@job("tests.flow_brief", tries=3, backoff=0)
def flow_brief(value: str, cx: JobContext) -> None:
    """Fail well within a second (before the worker first looks for a cancel), as soon
    as the test says "go": a retry follows unless a cancel was asked meanwhile."""
    _record("brief-start", value, cx.attempt)
    deadline = time.monotonic() + 0.8
    while time.monotonic() < deadline and not Record.objects.filter(kind="brief-go").exists():
        time.sleep(0.02)
    raise RuntimeError("brief")


if os.environ.get("LATERITE_TEST_FLOW"):
    # Jobs with a concurrency limit make every claim the limited one: only the workers
    # of the flow tests register them (tests/flow/test_flow_limits.py).
    from . import flow_jobs  # noqa: F401


# -- workflows (chains and batches) ---------------------------------------------------


@job("tests.step", tries=2, backoff=0)
def step(value: str, cx: JobContext) -> str:
    """Record a step of a workflow (with its batch, if any); fail for good while a
    `gate` record of the same value exists."""
    if Record.objects.filter(kind="gate", value=value).exists():
        raise Fail(f"gate {value} is closed")
    _record("step", value, cx.attempt)
    if cx.batch_id is not None:
        _record("step-batch", f"{value}@{cx.batch_id}")
    return value


@job("tests.grow", tries=1)
def grow(value: str, more: int, cx: JobContext) -> None:
    """Add `more` steps to this job's batch, then record itself."""
    cx.add_to_batch([step.call(f"{value}-{k}") for k in range(more)])
    _record("step", value, cx.attempt)


@job("tests.step_then_pause", queue="low", tries=1)
def step_then_pause(value: str, cx: JobContext) -> None:
    """Record a link, then pause its queue: the next link waits, pushed, unclaimed."""
    from laterite_django import pause_queue

    _record("step", value, cx.attempt)
    pause_queue("low")
    time.sleep(0.3)  # the worker sees the pause (LATERITE_QUEUE_POLL) before it claims again


@job("tests.member", tries=3, backoff=0)
def member(i: int, cx: JobContext) -> None:
    """A job of a big batch: record it; fail for good while a `gate` record of its
    number exists."""
    if Record.objects.filter(kind="gate", value=str(i)).exists():
        raise Fail(f"member {i} is gated")
    _record("member", str(i), cx.attempt)


# What `autocommit_seen` saw, in order (the in-process worker tests read it).
AUTOCOMMIT_SEEN: list[bool] = []


@job("tests.autocommit_seen")
def autocommit_seen(leave_off: bool = False) -> None:
    """Record whether the default connection is in autocommit as the job starts; with
    `leave_off`, leave it out of autocommit, as a job that forgot to restore it."""
    from django.db import connection

    AUTOCOMMIT_SEEN.append(connection.get_autocommit())
    if leave_off:
        connection.set_autocommit(False)


@job("tests.unstorable_error", tries=2, backoff=0)
def unstorable_error(value: str, cx: JobContext) -> None:
    """Record the attempt, then end it with a text no store can keep as is (a NUL, a
    lone surrogate): a Retry first, a plain exception the second time."""
    _record("unstorable", value, cx.attempt)
    if cx.attempt == 1:
        raise Retry(f"retry {value}\0nul \ud800 lone")
    raise ValueError(f"raised {value}\0nul \udcff lone")


# -- long jobs: cx.iterate, cx.step, Snooze ---------------------------------------------

def numbers(total: int):
    """A fetch function over 0..total-1: the cursor is the next number to give."""
    def fetch(cursor, n):
        start = cursor or 0
        end = min(start + n, total)
        return list(range(start, end)), (end if end < total else None)
    return fetch


@job("tests.walk", timeout=None, tries=3, backoff=0)
def walk(total: int, chunk: int, cx: JobContext, pause: float = 0.0) -> None:
    """Record each number of 0..total-1 once per chunk written (a chunk's records are
    written as its last number is done, before the cursor moves past it)."""
    done: list[Record] = []
    for n in cx.iterate(numbers(total), chunk=chunk):
        done.append(Record(kind="walk", value=str(n), attempt=cx.attempt, pid=os.getpid()))
        if len(done) == chunk or n == total - 1:
            Record.objects.bulk_create(done)
            done = []
            if pause:
                time.sleep(pause)


@job("tests.walk_rows", timeout=None, tries=3, backoff=0)
def walk_rows(kind: str, chunk: int, cx: JobContext, by: str = "pk",
              descending: bool = False, pause: float = 0.0) -> None:
    """Record the value of each `kind` Record, walked by keyset pagination."""
    rows = Record.objects.filter(kind=kind).order_by(f"-{by}" if descending else by)
    for row in cx.iterate(rows, by=by, chunk=chunk):
        _record(f"{kind}-seen", row.value, cx.attempt)
        if pause:
            time.sleep(pause)


@job("tests.charge", tries=3, backoff=0)
def charge(order: str, cx: JobContext, fail_after: int = 0) -> None:
    """A step that charges once across attempts; the attempts up to `fail_after` raise
    after it, and each attempt records the charge it saw."""
    with cx.step("charge") as step:
        if step.todo:
            _record("charged", order, cx.attempt)
            step.result = {"charge": f"ch_{order}_{cx.attempt}"}
    _record("receipt", step.result["charge"], cx.attempt)
    if cx.attempt <= fail_after:
        raise ValueError(f"after the step, attempt {cx.attempt}")


@job("tests.snoozy", tries=1, backoff=0)
def snoozy(value: str, times: int, seconds: float, cx: JobContext) -> None:
    """Snooze `times` times, `seconds` each, then record."""
    _record("snoozy-run", value, cx.attempt)
    if Record.objects.filter(kind="snoozy-run", value=value).count() <= times:
        raise Snooze(seconds)
    _record("snoozy-done", value, cx.attempt)


@job("tests.snoozy_twice", tries=1, backoff=0, max_snoozes=2)
def snoozy_twice(value: str, times: int, seconds: float, cx: JobContext) -> None:
    """snoozy, allowed two snoozes."""
    snoozy.func(value, times, seconds, cx)


def _record_spans(total: int, chunk: int, cx: JobContext, pause: float) -> None:
    """Walk 0..total-1 and record each chunk as one row: "first-last" with the attempt
    and the pid of the worker that did it (written as the chunk's last number is done,
    before the cursor moves past it); `pause` seconds per chunk, half before, half
    after its row."""
    first = None
    for n in cx.iterate(numbers(total), chunk=chunk):
        if first is None:
            first = n
            time.sleep(pause / 2)
        if (n + 1) % chunk == 0 or n == total - 1:
            _record("span", f"{first}-{n}", cx.attempt)
            first = None
            time.sleep(pause / 2)  # written, its cursor not yet saved


@job("tests.spans", timeout=None, tries=1, backoff=0)
def spans(total: int, chunk: int, cx: JobContext, pause: float = 0.0) -> None:
    """A long walk recorded a row per chunk, on one try: a charged hand-over fails it."""
    _record_spans(total, chunk, cx, pause)


@job("tests.spans_sturdy", timeout=None, tries=6, backoff=0)
def spans_sturdy(total: int, chunk: int, cx: JobContext, pause: float = 0.0) -> None:
    """spans, with a try for each of up to 5 workers killed under it, and no more."""
    _record_spans(total, chunk, cx, pause)

# Registered with the others: jobs with encrypted arguments.
from .encrypted_jobs import broken, every, named  # noqa: E402, F401


@job("tests.fair_record", fair_key=lambda tenant, i: f"tenant:{tenant}")
def fair_record(tenant: str, i: int) -> None:
    """Record `tenant:i` as it starts (fair claims: its tenant's turn)."""
    _record("fair", f"{tenant}:{i}")


def _seq_line(kind: str, key: str, n: int, attempt: int) -> None:
    """A line appended to $LATERITE_TEST_SEQ_LOG at once (one write: whole even if the
    process is SIGKILLed right after), so a run's start and end outlive its worker."""
    log = os.environ.get("LATERITE_TEST_SEQ_LOG")
    if not log:
        return
    fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        os.write(fd, f"{kind} {key} {n} {attempt} {os.getpid()} {time.time():.6f}\n".encode())
    finally:
        os.close(fd)


@job("tests.seq_step", queue="low", sequence=lambda key, n, **kw: key, tries=3, backoff=0,
     timeout=None)
def seq_step(key: str, n: int, cx: JobContext, seconds: float = 0.0, transient: int = 0,
             fail_once: bool = False) -> None:
    """A job of sequence `key`, the `n`th pushed: its start and end logged (_seq_line).
    It raises on its first `transient` attempts (retried), and with `fail_once` it fails
    for good the first time it runs (a marker file says it did), then runs if retried."""
    _seq_line("start", key, n, cx.attempt)
    time.sleep(seconds)
    if cx.attempt <= transient:
        _seq_line("end", key, n, cx.attempt)
        raise RuntimeError(f"{key}/{n}: transient failure {cx.attempt}")
    if fail_once:
        marker = f"{os.environ.get('LATERITE_TEST_SEQ_LOG', '/tmp/seq')}.failed-{key}-{n}"
        if not os.path.exists(marker):
            open(marker, "w").close()
            _seq_line("end", key, n, cx.attempt)
            raise Fail(f"{key}/{n}: failed for good, once")
    _seq_line("end", key, n, cx.attempt)


@job("tests.seq_go_on", queue="low", sequence=lambda key, n, **kw: key,
     sequence_on_failure="continue", tries=1, backoff=0)
def seq_go_on(key: str, n: int, fail: bool = False) -> None:
    """A job of a sequence that goes on after a failure: logged, failing if `fail`."""
    _seq_line("start", key, n, 1)
    _seq_line("end", key, n, 1)
    if fail:
        raise Fail(f"{key}/{n}: failed")
