"""Find the LateriteBackend a `laterite.task` job runs through, by its TASKS alias.

Below the backend, so that the task job (runner, task_run) need not import it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from .compat import task_backends

if TYPE_CHECKING:
    from .backend import LateriteBackend

__all__ = ["laterite_backend"]


def laterite_backend(alias: str) -> LateriteBackend:
    """Return the backend of TASKS[alias]; a `laterite.task` job runs only through a
    LateriteBackend, so any other is a TypeError naming it."""
    backend = task_backends[alias]
    # The mark every LateriteBackend carries (its class attribute).
    if getattr(backend, "runs_laterite_tasks", False) is not True:
        raise TypeError(f"TASKS[{alias!r}] is a {type(backend).__name__}, not a LateriteBackend.")
    return cast("LateriteBackend", backend)
