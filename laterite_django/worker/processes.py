"""Process plumbing for the supervisor: fork a worker with a pipe, hear it, reap it.

No policy here (when to start, kill or replace a worker, how to settle what
it left: see `supervisor`). Each child writes what it does with its claims as
JSON lines (see `reports`); `Child.hear` keeps the picture of what it holds.
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
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from django.db import connections

from .. import forking
from ..core.values import Claim
from ..flow.cancel import GRACE, LOOK_EVERY
from .reports import ReportReader, claim_from_dict
from .shutdown import FINISH, SIGNALS, STOP_NOW

__all__ = ["Child", "Processes", "describe_status", "die_with_parent"]

logger = logging.getLogger("laterite")

_BLOCKED = {*SIGNALS, FINISH, STOP_NOW}


@dataclass
class Child:
    """One worker process and what it reported."""

    pid: int
    fd: int
    slot: int
    started: float
    kill_margin: float = 0.0
    reader: ReportReader = field(default_factory=ReportReader)
    claims: dict[int, Claim] = field(default_factory=dict)
    # Jobs that succeeded and wait to be deleted with the worker's next claim.
    finished: dict[int, Claim] = field(default_factory=dict)
    running: Claim | None = None
    timeout: float | None = None
    deadline: float | None = None
    # When the running job, cancelled, is killed if it has not stopped by then.
    cancel_deadline: float | None = None
    exit_reason: str = ""
    killed_for: str = ""  # "timeout", "cancel" or "stop": the supervisor killed it
    # Where its counts for the metrics go (the supervisor's totals); None: ignored.
    on_tally: Callable[[dict[str, Any]], None] | None = None

    def hear(self, message: dict[str, Any]) -> None:
        """Update what this worker holds from one of its reports."""
        op = message.get("op")
        known: int = message.get("id", 0)
        claim: Claim | None
        if op == "hold":
            for data in message.get("claims", []):
                held = claim_from_dict(data)
                self.claims[held.id] = held
        elif op == "start":
            claim = self.claims.get(known)
            timeout = message.get("timeout")
            if claim is not None:  # for its history record, if this supervisor settles it
                claim.started = float(message.get("started") or 0.0)
            self.running, self.timeout, self.deadline = claim, timeout, None
            self.cancel_deadline = None
            if claim is not None and timeout:
                # Time for the worker's own alarm to stop the job and settle it.
                self.deadline = time.monotonic() + timeout * 1.05 + self.kill_margin
        elif op == "cancel":
            if self.running is not None and self.running.id == known and (
                    self.cancel_deadline is None):
                # The grace, a look of the heartbeat to interrupt it, then time to settle.
                self.cancel_deadline = time.monotonic() + GRACE + LOOK_EVERY + self.kill_margin
        elif op == "succeeded":
            claim = self.claims.pop(known, None)
            if claim is not None:
                claim.ended = float(message.get("ended") or 0.0)  # as for `started`
                self.finished[claim.id] = claim
                self._not_running(claim)
        elif op == "done":
            claim = self.claims.pop(known, None)
            self.finished.pop(known, None)
            if claim is not None:
                self._not_running(claim)
        elif op == "exit":
            self.exit_reason = str(message.get("reason", ""))
        elif op == "tally" and self.on_tally is not None:
            self.on_tally(message)

    def _not_running(self, claim: Claim) -> None:
        if self.running is claim:
            self.running = self.timeout = self.deadline = self.cancel_deadline = None

    def kill_due(self, now: float) -> str:
        """Why the supervisor must kill this worker now ("timeout" or "cancel"), or ""."""
        if self.killed_for or self.running is None:
            return ""
        if self.deadline is not None and now >= self.deadline:
            return "timeout"
        if self.cancel_deadline is not None and now >= self.cancel_deadline:
            return "cancel"
        return ""


def describe_status(status: int) -> str:
    """Say how a process ended, from its wait status."""
    if os.WIFSIGNALED(status):
        return f"was killed by {signal.Signals(os.WTERMSIG(status)).name}"
    code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else status
    return f"exited with code {code}"


def die_with_parent() -> None:
    """Have the kernel send STOP_NOW to this process if its parent dies (Linux)."""
    if not sys.platform.startswith("linux"):
        return
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(1, int(STOP_NOW), 0, 0, 0)  # PR_SET_PDEATHSIG


def kill(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, sig)


class Processes:
    """The forked workers of one supervisor, each with the read end of its pipe."""

    def __init__(
        self, *, kill_margin: float, on_tally: Callable[[dict[str, Any]], None] | None = None
    ) -> None:
        self.children: dict[int, Child] = {}
        self.kill_margin = kill_margin
        self.on_tally = on_tally
        self._selector = selectors.DefaultSelector()

    def spawn(self, slot: int, body: Callable[[int, Any], int]) -> Child:
        """Fork a child that runs `body(write_fd, signal_mask)` and exits with its code.

        Nothing the child could share is left open: no connection, no buffered
        output; stop signals wait until the child has installed its handlers.
        """
        connections.close_all()
        sys.stdout.flush()
        sys.stderr.flush()
        read_fd, write_fd = os.pipe()
        mask = signal.pthread_sigmask(signal.SIG_BLOCK, _BLOCKED)
        with forking.lock:  # no other thread of ours is inside SQLite or libpq now
            pid = os.fork()
        if pid == 0:  # pragma: no cover - runs in the child, measured through its effects
            code = 1
            try:
                os.close(read_fd)
                self._selector.close()
                for child in self.children.values():
                    os.close(child.fd)
                code = body(write_fd, mask)
            except BaseException:
                logger.exception("Worker process %s crashed", os.getpid())
            finally:
                os._exit(code)
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        os.close(write_fd)
        os.set_blocking(read_fd, False)
        child = Child(pid=pid, fd=read_fd, slot=slot, started=time.monotonic(),
                      kill_margin=self.kill_margin, on_tally=self.on_tally)
        self.children[pid] = child
        self._selector.register(read_fd, selectors.EVENT_READ, child)
        return child

    def listen(self, timeout: float) -> None:
        """Wait up to `timeout` seconds for reports, and hear them all."""
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
                self._close(child)
                return
            for message in child.reader.feed(data):
                child.hear(message)

    def _close(self, child: Child) -> None:
        if child.fd >= 0:
            self._selector.unregister(child.fd)
            os.close(child.fd)
            child.fd = -1

    def reap(self) -> Iterator[tuple[Child, int]]:
        """Yield each child that ended, with its wait status, its last reports heard."""
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
                self._close(child)  # a process the job started may still hold the pipe
            yield child, status

    def signal_all(self, sig: int) -> None:
        for child in self.children.values():
            kill(child.pid, sig)

    def close(self) -> None:
        self._selector.close()
