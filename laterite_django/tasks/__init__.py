"""Django's Tasks framework on laterite: `TASKS = {"default": {"BACKEND":
"laterite_django.tasks.LateriteBackend"}}`.

The names are loaded on first use, so the worker can import the task job
(`laterite_django.tasks.runner`) on a Django without the framework.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .backend import LateriteBackend
    from .task import DEFAULT, LateriteTask

__all__ = ["DEFAULT", "LateriteBackend", "LateriteTask"]

_WHERE = {"LateriteBackend": ".backend", "LateriteTask": ".task", "DEFAULT": ".task"}


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(_WHERE[name], __name__), name)
