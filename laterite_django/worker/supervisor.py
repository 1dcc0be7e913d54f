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

import contextlib
import ctypes
import logging
import os
import selectors
import signal
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from django.db import connections

from ..stores import Claim, get_store, reset_store
from .loop import TIMEOUT_REASON, Worker, default_worker_name
from .reports import PipeReporter, ReportReader, claim_from_dict
from .shutdown import FINISH, SIGNALS, STOP_NOW, stop_signals

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
_BLOCKED = {*SIGNALS, FINISH, STOP_NOW}


@dataclass
class Child:
    """One worker process and what it reported."""

    pid: int
    fd: int
    slot: int
    started: float
    reader: ReportReader = field(default_factory=ReportReader)
    claims: dict[int, Claim] = field(default_factory=dict)
    # Jobs that succeeded and wait to be deleted with the worker's next claim.
    finished: dict[int, Claim] = field(default_factory=dict)
    running: Claim | None = None
    timeout: float | None = None
    deadline: float | None = None
    exit_reason: str = ""
    killed_for: str = ""  # "timeout" or "stop": the supervisor killed it


def describe_status(status: int) -> str:
    """Say how a process ended, from its wait status."""
    if os.WIFSIGNALED(status):
        return f"was killed by {signal.Signals(os.WTERMSIG(status)).name}"
    code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else status
    return f"exited with code {code}"


def _die_with_parent() -> None:
    """Have the kernel send STOP_NOW to this process if the supervisor dies (Linux)."""
    if not sys.platform.startswith("linux"):
        return
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(1, int(STOP_NOW), 0, 0, 0)  # PR_SET_PDEATHSIG


def _kill(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, sig)


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
        self.children: dict[int, Child] = {}
        # The Worker's rules settle what a dead worker left; never waits on a down store.
        self.rules = Worker(self.queues, name=f"{name or default_worker_name()}:supervisor",
                            store=get_store())
        self.rules.settle_patience = 0
        self._selector = selectors.DefaultSelector()
        self._signals: list[int] = []
        self._stopping = False
        self._grace_end: float | None = None
        self._stop_now_at: float | None = None
        self._due: dict[int, float] = {}  # slot -> when to start its next worker
        self._crashes: dict[int, int] = {}  # slot -> workers in a row that crashed at start
        self._started = 0.0

    # -- the loop -------------------------------------------------------------------

    def run(self) -> int:
        """Supervise until stopped (or every worker is done); return the exit code, 0."""
        self._started = time.monotonic()
        previous = {sig: signal.signal(sig, self._on_signal) for sig in SIGNALS}
        logger.info(
            "Supervisor %s starting %d worker processes on queues %s",
            os.getpid(), self.processes, ", ".join(self.queues),
            extra={"action": "supervisor_started", "processes": self.processes},
        )
        try:
            self._due = {slot: self._started for slot in range(self.processes)}
            while True:
                self._read(TICK)
                self._reap()
                self._handle_signals()
                now = time.monotonic()
                self._enforce_deadlines(now)
                if self._stopping:
                    self._due.clear()
                    if self._stop_now_at is None and self._grace_end and now >= self._grace_end:
                        self._stop_now(f"the grace of {self.grace:g} s is over")
                    if self._stop_now_at is not None and now >= self._stop_now_at:
                        self._kill_all("stop")
                    if not self.children:
                        break
                else:
                    self._start_due(now)
                    if not self.children and not self._due:
                        break
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            self._selector.close()
        logger.info("Supervisor %s stopped", os.getpid(), extra={"action": "supervisor_stopped"})
        return 0

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
                self._signal_all(FINISH)
            elif self._stop_now_at is None:
                self._stop_now(f"{name} received again")

    def _stop_now(self, why: str) -> None:
        logger.warning("%s: stopping now, jobs back to their queues", why,
                       extra={"action": "stop_now"})
        self._stop_now_at = time.monotonic() + STOP_NOW_MARGIN
        self._signal_all(STOP_NOW)

    def _signal_all(self, sig: int) -> None:
        for child in self.children.values():
            _kill(child.pid, sig)

    def _kill_all(self, why: str) -> None:
        for child in self.children.values():
            if not child.killed_for:
                child.killed_for = why
                _kill(child.pid, signal.SIGKILL)

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
        # Nothing the child could share: no open connection, no buffered output.
        connections.close_all()
        self.rules.store.close()
        sys.stdout.flush()
        sys.stderr.flush()
        read_fd, write_fd = os.pipe()
        # Until the child has its own handlers, a stop signal must wait, not run ours.
        mask = signal.pthread_sigmask(signal.SIG_BLOCK, _BLOCKED)
        parent = os.getpid()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - runs in the child, measured through its effects
            code = 1
            try:
                os.close(read_fd)
                self._selector.close()
                for child in self.children.values():
                    os.close(child.fd)
                code = self._child(write_fd, slot, max_seconds, mask, parent)
            except BaseException:
                logger.exception("Worker process %s crashed", os.getpid())
            finally:
                os._exit(code)
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        os.close(write_fd)
        os.set_blocking(read_fd, False)
        child = Child(pid=pid, fd=read_fd, slot=slot, started=time.monotonic())
        self.children[pid] = child
        self._selector.register(read_fd, selectors.EVENT_READ, child)
        logger.info("Started worker process %s", pid,
                    extra={"action": "worker_process_started", "pid": pid, "slot": slot})

    def _child(
        self, fd: int, slot: int, max_seconds: float | None, mask: Any, parent: int
    ) -> int:  # pragma: no cover - runs in the child
        _die_with_parent()
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        reset_store()
        name = f"{self.name}-{slot}" if self.name else None
        worker = Worker(self.queues, name=name, max_seconds=max_seconds,
                        monitor=PipeReporter(fd), **self.worker_options)
        with stop_signals(worker.stop, worker.stop_now):
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)
            if os.getppid() != parent:
                return 0  # the supervisor died before this worker started
            worker.run()
        return 0

    # -- hearing from workers ---------------------------------------------------------

    def _read(self, timeout: float) -> None:
        for key, _ in self._selector.select(timeout):
            self._drain(key.data)

    def _drain(self, child: Child) -> None:
        """Read all the child has written; close the pipe at its end."""
        while True:
            try:
                data = os.read(child.fd, 65536)
            except BlockingIOError:
                return
            except OSError:
                data = b""
            if not data:
                self._selector.unregister(child.fd)
                os.close(child.fd)
                child.fd = -1
                return
            for message in child.reader.feed(data):
                self._hear(child, message)

    def _hear(self, child: Child, message: dict[str, Any]) -> None:
        op = message.get("op")
        if op == "hold":
            for data in message.get("claims", []):
                claim = claim_from_dict(data)
                child.claims[claim.id] = claim
        elif op == "start":
            claim = child.claims.get(message.get("id"))
            timeout = message.get("timeout")
            child.running, child.timeout = claim, timeout
            child.deadline = None
            if claim is not None and timeout:
                child.deadline = time.monotonic() + timeout * 1.05 + self.kill_margin
        elif op == "succeeded":
            claim = child.claims.pop(message.get("id"), None)
            if claim is not None:
                child.finished[claim.id] = claim
                if child.running is claim:
                    child.running = child.timeout = child.deadline = None
        elif op == "done":
            claim = child.claims.pop(message.get("id"), None)
            child.finished.pop(message.get("id"), None)
            if claim is not None and child.running is claim:
                child.running = child.timeout = child.deadline = None
        elif op == "exit":
            child.exit_reason = str(message.get("reason", ""))

    # -- deadlines and deaths -----------------------------------------------------------

    def _enforce_deadlines(self, now: float) -> None:
        for child in self.children.values():
            if child.deadline is None or now < child.deadline or child.killed_for:
                continue
            claim = child.running
            logger.error(
                "Job %s #%s ran past its timeout of %g s and did not stop; "
                "killing worker process %s", claim.name, claim.id, child.timeout, child.pid,
                extra={"action": "worker_process_killed", "pid": child.pid, "id": claim.id},
            )
            child.killed_for = "timeout"
            _kill(child.pid, signal.SIGKILL)

    def _reap(self) -> None:
        while self.children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            child = self.children.pop(pid, None)
            if child is None:
                continue
            if child.fd >= 0:
                self._drain(child)
                if child.fd >= 0:  # a process the job started still holds the pipe
                    self._selector.unregister(child.fd)
                    os.close(child.fd)
            self._settle_left(child, status)
            self._replace(child, status)

    def _settle_left(self, child: Child, status: int) -> None:
        """Settle the claims a finished worker still held."""
        if not child.claims and not child.finished:
            return
        how = describe_status(status)
        try:
            if child.finished:
                # They succeeded; the worker died before deleting them.
                self.rules.store.delete(list(child.finished.values()))
            for claim in child.claims.values():
                if claim is not child.running or child.killed_for == "stop":
                    # Never started, or stopped at shutdown: not an attempt.
                    self.rules.give_back(claim)
                    logger.warning("Returned job %s #%s left by worker process %s",
                                   claim.name, claim.id, child.pid,
                                   extra={"action": "job_returned", "id": claim.id})
                    continue
                if child.killed_for == "timeout":
                    error = (f"{TIMEOUT_REASON.format(seconds=child.timeout)}; it did not "
                             f"stop, so its worker process {child.pid} was killed")
                else:
                    error = f"worker lost: its process {child.pid} {how} while running it"
                outcome = self.rules.settle_failed_attempt(claim, error)
                logger.warning("Job %s #%s %s: %s", claim.name, claim.id, outcome.status, error,
                               extra={"action": f"job_{outcome.status}", "id": claim.id,
                                      "error": error})
        except Exception:
            # The store is down: the claims expire after retry_after and return then.
            logger.exception("Could not settle the jobs of worker process %s", child.pid)
        finally:
            connections.close_all()
            self.rules.store.close()

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
        elif child.killed_for == "timeout":
            logger.warning("Worker process %s %s; starting another", child.pid, how,
                           extra=extra)
        else:
            logger.error("Worker process %s %s; starting another", child.pid, how,
                         extra=extra)
            if not os.WIFSIGNALED(status) and time.monotonic() - child.started < 5:
                # Dying at start-up again and again: wait longer each time.
                crashes = self._crashes.get(child.slot, 0) + 1
                self._crashes[child.slot] = crashes
                delay = min(0.5 * 2 ** (crashes - 1), 30.0)
        if delay == 0.0:
            self._crashes.pop(child.slot, None)
        self._due[child.slot] = time.monotonic() + delay
