"""The supervisor: N worker processes, replaced when they die, killed when stuck.

`queue_work --processes N` forks N workers and watches them. Each worker
reports its claims and the job it runs through a pipe (see `reports`), so the
supervisor can settle a job whose worker cannot: one stuck past its timeout in
code that never returns to the interpreter is killed and its attempt counted
as timed out; one that died has its attempt counted as lost. The rules used
for that are the Worker's own. The supervisor holds no threads, and closes
every connection before it forks.
"""

from __future__ import annotations

import logging
import os
import signal
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from django.db import connections
from django.utils import timezone

from ..core import rules
from ..core.backoff import Growing
from ..core.cancel import reason as cancel_reason
from ..core.rules import Action, Attempt, Ending
from ..core.values import Claim
from ..registry import registry
from ..stores import get_store, reset_store
from .attempt import after_settle, options_of
from .loop import Worker
from .processes import Child, Processes, describe_status, die_with_parent, kill
from .reports import PipeReporter
from .settle import Settled, Settler
from .shutdown import FINISH, SIGNALS, STOP_NOW, stop_signals
from .tally import OUTCOMES, Tally

if TYPE_CHECKING:
    from ..metrics.totals import Totals
    from ..schedules.scheduler import Scheduler

__all__ = ["KILL_MARGIN", "Supervisor", "describe_status"]

logger = logging.getLogger("laterite")

# Seconds past a job's timeout (plus 5% of it) before its process is killed:
# time for the worker's own alarm to stop the job and settle it.
KILL_MARGIN = 2.0
# Seconds a worker has to return its jobs after "stop now" before it is killed.
STOP_NOW_MARGIN = 3.0
# How often the supervisor looks at its workers when nothing is said on the pipes.
TICK = 0.1
# Why a worker stopped on its own that calls for a fresh one in its place.
RECYCLE_REASONS = {"max-jobs": "--max-jobs", "max-memory": "--max-memory"}
# Why a worker stopped that leaves its slot empty: its work is done.
FINAL_REASONS = {"empty", "max-seconds", "once"}


class Supervisor:
    """Run `processes` worker processes until stopped, replacing each that ends early."""

    def __init__(
        self,
        processes: int,
        queues: Sequence[str],
        *,
        name: str | None = None,
        grace: float | None = None,
        max_seconds: float | None = None,
        kill_margin: float = KILL_MARGIN,
        scheduler: Scheduler | None = None,
        totals: Totals | None = None,
        **worker_options: Any,
    ) -> None:
        if processes < 1:
            raise ValueError(f"processes must be 1 or more, got {processes!r}")
        self.processes = processes
        self.queues = list(queues)
        self.name = name
        self.grace = grace
        self.max_seconds = max_seconds
        self.kill_margin = kill_margin
        self.worker_options = worker_options
        # The metrics' sums (queue_work --metrics-port): each worker's counts end here,
        # so none is lost or split when a worker process is replaced.
        self.totals = totals
        self.procs = Processes(kill_margin=kill_margin,
                               on_tally=None if totals is None else totals.add)
        # Settles what a dead worker left, by the rules; never waits on a down store.
        self.store = get_store()
        self.settler = Settler(self.store, patience=0)
        self._signals: list[int] = []
        self._stopping = False
        self._grace_end: float | None = None
        self._stop_now_at: float | None = None
        self._due: dict[int, float] = {}  # slot -> when to start its next worker
        # slot -> the wait before restarting a worker that keeps crashing at start
        self._crashes: dict[int, Growing] = {}
        self._started = 0.0
        # When the loop last turned (queue_work --health-port's /livez); None: not yet.
        self.turned_at: float | None = None
        # Recurring schedules, fired from this loop (the supervisor holds no threads).
        self.scheduler = scheduler
        self._next_schedule = 0.0

    # -- the loop -------------------------------------------------------------------

    def run(self, handlers_set: Callable[[], None] | None = None) -> int:
        """Supervise until stopped (or every worker is done); return the exit code, 0.

        `handlers_set` is called once this supervisor's signal handlers are in place
        (queue_work replays there the stop signals that came before them)."""
        self._started = time.monotonic()
        previous = {sig: signal.signal(sig, self._on_signal) for sig in SIGNALS}
        if handlers_set is not None:
            handlers_set()
        logger.info(
            "Supervisor %s starting %d worker processes on queues %s",
            os.getpid(), self.processes, ", ".join(self.queues),
            extra={"action": "supervisor_started", "processes": self.processes},
        )
        try:
            self._due = {slot: self._started for slot in range(self.processes)}
            while True:
                self.turned_at = time.monotonic()
                self.procs.listen(TICK)
                # Signals first: a worker that got the same Ctrl-C and stopped is
                # then seen as part of the shutdown, not replaced.
                self._handle_signals()
                for child, status in self.procs.reap():
                    self._settle_left(child, status)
                    self._replace(child, status)
                now = time.monotonic()
                self._enforce_deadlines(now)
                if self._stopping:
                    self._due.clear()
                    if self._stop_now_at is None and self._grace_end and now >= self._grace_end:
                        self._stop_now(f"the grace of {self.grace:g} s is over")
                    if self._stop_now_at is not None and now >= self._stop_now_at:
                        self._kill_all("stop")
                    if not self.procs.children:
                        break
                else:
                    self._start_due(now)
                    if not self.procs.children and not self._due:
                        break
                    self._schedule(now)
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            self.procs.close()
        logger.info("Supervisor %s stopped", os.getpid(), extra={"action": "supervisor_stopped"})
        return 0

    def stuck(self, within: float) -> str | None:
        """Why the loop is not turning (no turn for `within` seconds), or None."""
        if self.turned_at is None:
            return None
        late = time.monotonic() - self.turned_at
        return f"the supervisor's loop has not turned for {late:.0f} s" if late > within else None

    def _schedule(self, now: float) -> None:
        """Fire the due ticks of the schedules, when the scheduler asked to look again."""
        if self.scheduler is not None and now >= self._next_schedule:
            self._next_schedule = time.monotonic() + self.scheduler.round()

    def _on_signal(self, signum: int, frame: object) -> None:
        self._signals.append(signum)

    def _handle_signals(self) -> None:
        while self._signals:
            name = signal.Signals(self._signals.pop(0)).name
            if not self._stopping:
                self._stopping = True
                if self.grace is not None:
                    self._grace_end = time.monotonic() + self.grace
                logger.info(
                    "%s received: workers finish the jobs in hand, then stop%s", name,
                    "" if self.grace is None else f" (grace {self.grace:g} s)",
                    extra={"action": "stop_requested", "signal": name},
                )
                self.procs.signal_all(FINISH)
            elif self._stop_now_at is None:
                self._stop_now(f"{name} received again")

    def _stop_now(self, why: str) -> None:
        logger.warning("%s: stopping now, jobs back to their queues", why,
                       extra={"action": "stop_now"})
        self._stop_now_at = time.monotonic() + STOP_NOW_MARGIN
        self.procs.signal_all(STOP_NOW)

    def _kill_all(self, why: str) -> None:
        for child in self.procs.children.values():
            if not child.killed_for:
                child.killed_for = why
                kill(child.pid, signal.SIGKILL)

    # -- starting workers -------------------------------------------------------------

    def _start_due(self, now: float) -> None:
        for slot, when in list(self._due.items()):
            if when > now:
                continue
            del self._due[slot]
            max_seconds = None
            if self.max_seconds is not None:
                max_seconds = self.max_seconds - (now - self._started)
                if max_seconds <= 0:
                    continue
            self._spawn(slot, max_seconds)

    def _spawn(self, slot: int, max_seconds: float | None) -> None:
        self.store.close()

        def body(fd: int, mask: Any) -> int:  # pragma: no cover - runs in the child
            return self._child(fd, slot, max_seconds, mask, parent)

        parent = os.getpid()
        child = self.procs.spawn(slot, body)
        logger.info("Started worker process %s", child.pid,
                    extra={"action": "worker_process_started", "pid": child.pid, "slot": slot})

    def _child(
        self, fd: int, slot: int, max_seconds: float | None, mask: Any, parent: int
    ) -> int:  # pragma: no cover - runs in the child
        die_with_parent()
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        reset_store()
        name = f"{self.name}-{slot}" if self.name else None
        reporter = PipeReporter(fd)
        worker = Worker(self.queues, name=name, max_seconds=max_seconds,
                        monitor=reporter, **self.worker_options)
        if self.totals is not None:
            worker.tally = Tally(reporter.tally)
        with stop_signals(worker.stop, worker.stop_now):
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)
            if os.getppid() != parent:
                return 0  # the supervisor died before this worker started
            worker.run()
        return 0

    # -- deadlines and deaths -----------------------------------------------------------

    def _enforce_deadlines(self, now: float) -> None:
        for child in self.procs.children.values():
            why = child.kill_due(now)
            if not why:
                continue
            claim = child.running
            assert claim is not None
            extra = {"action": "worker_process_killed", "pid": child.pid, "id": claim.id}
            if why == "timeout":
                logger.error(
                    "Job %s #%s ran past its timeout of %g s and did not stop; "
                    "killing worker process %s", claim.name, claim.id, child.timeout,
                    child.pid, extra=extra)
            else:
                logger.error(
                    "Job %s #%s was cancelled and did not stop; killing worker process %s",
                    claim.name, claim.id, child.pid, extra=extra)
            child.killed_for = why
            kill(child.pid, signal.SIGKILL)

    def _settle_left(self, child: Child, status: int) -> None:
        """Settle the claims a finished worker still held."""
        if not child.claims and not child.finished:
            return
        how = describe_status(status)
        try:
            if child.finished:
                # They succeeded; the worker died before deleting them.
                self.store.delete(list(child.finished.values()))
            for claim in child.claims.values():
                self._settle_one(child, claim, how)
        except Exception:
            # The store is down: the claims expire after retry_after and return then.
            logger.exception("Could not settle the jobs of worker process %s", child.pid)
        finally:
            connections.close_all()
            self.store.close()

    def _settle_one(self, child: Child, claim: Claim, how: str) -> None:
        """Settle one claim a finished worker held, by the rules."""
        if claim is not child.running:
            ending = Ending.UNSTARTED  # never started: not an attempt
            error = claim.last_error
        elif child.killed_for == "stop":
            ending = Ending.STOPPED  # stopped at shutdown: not charged a try
            error = claim.last_error
        elif child.killed_for == "timeout":
            ending = Ending.TIMED_OUT
            error = (f"{rules.timeout_reason(child.timeout)}; it did not stop, so its "
                     f"worker process {child.pid} was killed")
        elif child.killed_for == "cancel":
            ending = Ending.CANCELLED
            error = (f"{cancel_reason(True)}; it did not stop, so its worker process "
                     f"{child.pid} was killed")
        else:
            ending = Ending.LOST
            error = f"{rules.LOST}: its process {child.pid} {how} while running it"
        decision = rules.after_attempt(claim, options_of(claim), Attempt(ending, error),
                                       timezone.now())
        returned = ending in (Ending.STOPPED, Ending.UNSTARTED)
        if not returned and decision.action is Action.RELEASE and (
                self.store.cancel_requested([claim])):
            decision = rules.cancelled_instead(decision)  # cancelled: not retried
        settled = self.settler.apply(claim, decision)
        outcome = OUTCOMES.get(settled)
        if self.totals is not None and outcome is not None:
            self.totals.count(claim.queue, claim.name, outcome)
        job = registry.find(claim.name)
        if job is not None and settled != Settled.LOST:
            after_settle(job, claim, decision)
        if returned:
            logger.warning("Returned job %s #%s left by worker process %s", claim.name,
                           claim.id, child.pid, extra={"action": "job_returned", "id": claim.id})
            return
        logger.warning("Job %s #%s %s: %s", claim.name, claim.id, settled, error,
                       extra={"action": f"job_{settled}", "id": claim.id, "error": error})

    def _replace(self, child: Child, status: int) -> None:
        """Log why a worker ended and, unless stopping or done, start another."""
        how = describe_status(status)
        extra = {"action": "worker_process_ended", "pid": child.pid, "status": how,
                 "reason": child.exit_reason}
        clean = os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
        if clean and child.exit_reason in FINAL_REASONS:
            logger.info("Worker process %s is done (%s)", child.pid, child.exit_reason,
                        extra=extra)
            return
        if self._stopping:
            logger.info("Worker process %s stopped (%s)", child.pid, how, extra=extra)
            return
        delay = 0.0
        if clean and child.exit_reason in RECYCLE_REASONS:
            logger.info("Worker process %s recycled (%s); starting another", child.pid,
                        RECYCLE_REASONS[child.exit_reason], extra=extra)
        elif clean:
            logger.warning("Worker process %s stopped (%s); starting another", child.pid,
                           child.exit_reason or how, extra=extra)
        elif child.killed_for in ("timeout", "cancel"):
            logger.warning("Worker process %s %s; starting another", child.pid, how,
                           extra=extra)
        else:
            logger.error("Worker process %s %s; starting another", child.pid, how,
                         extra=extra)
            if not os.WIFSIGNALED(status) and time.monotonic() - child.started < 5:
                # Dying at start-up again and again: wait longer each time.
                delay = self._crashes.setdefault(child.slot, Growing(0.5, cap=30.0)).next()
        if delay == 0.0:
            self._crashes.pop(child.slot, None)
        self._due[child.slot] = time.monotonic() + delay
