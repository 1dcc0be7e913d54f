"""Named points between two writes where a test can kill the process: a crash at every step.

The promise is "nothing lost, nothing run twice" whatever moment a process dies at. A
multi-step operation (a push with its outbox, a claim, a settle, a retry from the failed
list, a cancel, a batch's count, a chain's next link, a schedule's fire, the sweep) calls
`crash_point("operation.step")` between two of its writes, and the crash-point tests
(tests/worker/test_crash_points.py) run it in a subprocess started with
`LATERITE_CRASH_AT=operation.step`: the process SIGKILLs itself there, then a fresh
worker must leave every job run once or on the failed list with its reason.

`LATERITE_CRASH_AT=name:N` kills on the Nth time the point is reached (the first by
default). The variable is read once, at import: in production the cost of a point is one
comparison of a constant against None (push and claim are hot paths).

Where a point goes: between writes that are separate in the store. In the database
stores a transaction makes its statements one write (a crash before its commit is a
crash before it began), so a point sits between two transactions or round trips, or
just before or after a commit; on Redis a Lua script is one write, so a point sits
between two script calls or round trips. Every name must be in POINTS (a test greps the
package for calls and fails on one missing, or on a name in POINTS no call uses).

This module imports nothing of the package: any layer may call it.
"""

from __future__ import annotations

import os
import signal
import threading

__all__ = ["ENV", "POINTS", "crash_point"]

# The environment variable naming the point to crash at: "name" or "name:N".
ENV = "LATERITE_CRASH_AT"

# Every point the package calls, "operation.step", grouped by operation; where a point
# sits and what the tests assert there: tests/worker/test_crash_points.py.
POINTS: tuple[str, ...] = (
    "push.outbox_written", "push.outbox.after_commit", "push.outbox.after_redis_push",
    "claim.after",
    "heartbeat.after_beat",
    "delete.before", "delete.after",
    "release.before", "release.after",
    "fail.before", "fail.after_mark", "fail.after_failed_row", "fail.before_commit",
    "fail.after",
    "failed.after_removals", "failed.retry.after_push",
    "cancel.after_hold", "cancel.after_rows", "cancel.before_commit",
    "batch.count.after_finish", "batch.count.after_count", "batch.count.after_decrement",
    "batch.count.before_commit", "batch.callbacks.after_push",
    "chain.next.after_push",
    "schedule.fire.after_push",
    "sweep.after_orphans", "sweep.after_requeue", "sweep.after_marked",
    "iterate.after_save", "step.after_save",
)


def _parse(value: str | None) -> tuple[str | None, int]:
    """Split "name" or "name:N" into the name and N (1 when absent); None when unset."""
    if not value:
        return None, 1
    name, _, nth = value.partition(":")
    return name, int(nth) if nth else 1


_AT, _NTH = _parse(os.environ.get(ENV))
_reached = 0
_lock = threading.Lock()


def crash_point(name: str) -> None:
    """SIGKILL this process if LATERITE_CRASH_AT names this point (at its Nth time)."""
    if _AT is not None and name == _AT:
        _crash(name)


def _crash(name: str) -> None:
    global _reached
    with _lock:
        _reached += 1
        if _reached < _NTH:
            return
    # Said on stderr first (unbuffered): a test reading a worker's output sees which point
    # killed it, even where the killed process is a child whose exit code it cannot see.
    os.write(2, f"laterite crash point: {name} (pid {os.getpid()})\n".encode())
    os.kill(os.getpid(), signal.SIGKILL)
