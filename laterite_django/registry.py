"""The name -> job table that @job fills and the worker reads; no Django imports."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING

from .exceptions import DuplicateJobName, JobNotRegistered

if TYPE_CHECKING:
    from .jobs import JobFunction

__all__ = ["Registry", "registry"]


class Registry:
    """Every job defined in this process, by name."""

    def __init__(self) -> None:
        self._jobs: dict[str, JobFunction] = {}
        self._lock = threading.Lock()

    def register(self, job: JobFunction) -> None:
        """Record `job`; raise DuplicateJobName if another function has its name."""
        with self._lock:
            existing = self._jobs.get(job.name)
            if existing is not None and existing.qualified_function != job.qualified_function:
                raise DuplicateJobName(
                    f"Two jobs are named {job.name!r}: {existing.qualified_function} and "
                    f"{job.qualified_function}. Give one of them another name with "
                    f"@job(name=...)."
                )
            # Re-importing the same module (autoreload, tests) replaces the entry.
            self._jobs[job.name] = job

    def unregister(self, name: str) -> None:
        """Forget the job called `name`, if any (for tests that define jobs on the fly)."""
        with self._lock:
            self._jobs.pop(name, None)

    def get(self, name: str) -> JobFunction:
        """Return the job called `name`; raise JobNotRegistered if none is."""
        try:
            return self._jobs[name]
        except KeyError:
            known = ", ".join(sorted(self._jobs)) or "none"
            raise JobNotRegistered(
                f"No job is named {name!r}. Registered jobs: {known}. Is the module that "
                f"defines it an installed app's jobs.py (or imported by one)?"
            ) from None

    def find(self, name: str) -> JobFunction | None:
        """Return the job called `name`, or None."""
        return self._jobs.get(name)

    def __contains__(self, name: object) -> bool:
        return name in self._jobs

    def __iter__(self) -> Iterator[JobFunction]:
        return iter(sorted(self._jobs.values(), key=lambda job: job.name))

    def __len__(self) -> int:
        return len(self._jobs)

    def names(self) -> list[str]:
        """Return the registered job names, sorted."""
        return sorted(self._jobs)


registry = Registry()
