"""Schedule definitions: LATERITE_QUEUE_SCHEDULES and `@job(..., schedule=...)`.

Each definition is checked here, once, by one set of rules: the system check
(`laterite.E02x`, naming the schedule) reports every problem, and `schedules()`
raises the first one where a scheduler starts without the checks
(`queue_work --skip-checks`, the `worker` mode under a WSGI server).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from numbers import Real
from typing import TYPE_CHECKING, Any, NamedTuple
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from django.conf import settings as django_settings

from .. import payload
from ..core.sizes import NAME_MAX, QUEUE_MAX
from ..exceptions import InvalidPayload, LateriteConfigurationError
from ..registry import registry
from .tasks import SCHEDULED_TASK, scheduled_task_job, task_problem
from .ticks import CronTicks, EveryTicks, Ticks, cron_problem, expand_alias

if TYPE_CHECKING:
    from ..jobs import JobFunction

__all__ = [
    "KEYS", "MISSED", "MISSED_AFTER", "MISSED_LIMIT", "MISSED_LIMIT_MAX", "Schedule",
    "ScheduleProblem", "missed_limit_problem", "problems", "schedules",
]

MISSED = ("skip", "latest", "all")
# A tick no scheduler fired within this long is missed; `missed` says what becomes of it.
MISSED_AFTER = timedelta(seconds=60)
# `missed: "all"` fires at most this many missed ticks (the newest); older ones are passed
# over. A day of an hourly schedule, and a burst of jobs a queue takes in its stride: the
# others (Celery beat, Oban, Sidekiq-cron) fire one missed run at most.
MISSED_LIMIT = 24
# The highest `missed_limit`: a burst bigger than this is an outage of its own.
MISSED_LIMIT_MAX = 1000
KEYS = ("job", "task", "cron", "every", "args", "kwargs", "timezone", "missed",
        "missed_limit", "overlap", "queue")
# The shortest interval: the scheduler looks at the clock about once a second.
EVERY_MIN = timedelta(seconds=1)


@dataclass(frozen=True)
class Schedule:
    """One recurring schedule: push `job` with `args`/`kwargs` at each tick of its rule."""

    name: str
    job: str
    cron: str | None = None
    every: timedelta | None = None
    args: tuple = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    timezone: ZoneInfo = field(default_factory=lambda: ZoneInfo("UTC"))
    missed: str = "skip"
    missed_limit: int = MISSED_LIMIT
    overlap: bool = True
    queue: str | None = None  # None: the job's own
    task: str | None = None  # a Tasks-framework task's path (its job: laterite.scheduled_task)

    @property
    def target(self) -> str:
        """What it runs, as listed: the job's name, or the task's path."""
        return self.task or self.job

    @property
    def ticks(self) -> Ticks:
        if self.cron is not None:
            return CronTicks(self.cron, self.timezone)
        assert self.every is not None
        return EveryTicks(self.every)

    @property
    def rule(self) -> str:
        """The rule as a person reads it: the cron expression, or "every 30s"."""
        if self.cron is not None:
            return self.cron
        assert self.every is not None
        return f"every {self.every.total_seconds():g}s"

    @property
    def rule_hash(self) -> str:
        """A digest of when its ticks fall (cron and zone, or interval), kept with its
        cursor: a different one in the store means the rule changed, and the schedule
        starts over from then rather than catching up on ticks of the old one."""
        if self.cron is not None:
            text = f"cron {' '.join(expand_alias(self.cron).split())} {self.timezone.key}"
        else:
            assert self.every is not None
            text = f"every {self.every // timedelta(microseconds=1)}us"
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def next_ticks(self, after: datetime, count: int = 3) -> list[datetime]:
        """The next `count` ticks after `after` (fewer if the rule runs out)."""
        ticks, found = self.ticks, list[datetime]()
        moment: datetime | None = after
        while len(found) < count:
            moment = ticks.next_after(moment)  # type: ignore[arg-type]
            if moment is None:
                break
            found.append(moment)
        return found

    def job_function(self) -> JobFunction:
        found = registry.find(self.job)
        if found is None:
            raise LateriteConfigurationError(f"Schedule {self.name!r}: job {self.job!r} is "
                                             f"not registered.")
        return found


class ScheduleProblem(NamedTuple):
    """What is wrong with one schedule: its check id, the message (naming it), a hint."""

    code: int
    message: str
    hint: str | None = None


def missed_limit_problem(value: object) -> str | None:
    """Say what is wrong with a `missed_limit`, or return None."""
    if isinstance(value, int) and not isinstance(value, bool) and (
            1 <= value <= MISSED_LIMIT_MAX):
        return None
    return f"missed_limit must be a whole number from 1 to {MISSED_LIMIT_MAX}, got {value!r}"


def _definitions() -> list[tuple[str, Any, str]]:
    """(name, definition, where) for each schedule: the setting's, then the jobs'."""
    found: list[tuple[str, Any, str]] = []
    configured = getattr(django_settings, "LATERITE_QUEUE_SCHEDULES", {})
    if isinstance(configured, Mapping):
        for name, spec in configured.items():
            found.append((name, spec, "LATERITE_QUEUE_SCHEDULES"))
    for job in registry:
        rule = getattr(job, "schedule", None)
        if rule is not None:
            key = "cron" if isinstance(rule, str) else "every"
            found.append((job.name, {"job": job.name, key: rule}, f"@job({job.name!r})"))
    return found


def _seconds(value: Any) -> timedelta | None:
    if isinstance(value, timedelta):
        return value
    if isinstance(value, Real) and not isinstance(value, bool):
        return timedelta(seconds=float(value))
    return None


def _check(name: Any, spec: Any) -> tuple[Schedule | None, list[ScheduleProblem]]:
    """Build one schedule, or say everything wrong with it."""
    found: list[ScheduleProblem] = []

    def bad(code: int, text: str, hint: str | None = None) -> None:
        found.append(ScheduleProblem(code, f"Schedule {name!r}: {text}.", hint))

    if not isinstance(name, str) or not name or len(name) > NAME_MAX:
        bad(20, f"a schedule name must be a non-empty string of at most {NAME_MAX} "
                f"characters")
        return None, found
    if not isinstance(spec, Mapping):
        bad(20, f"its definition must be a dict, got {type(spec).__name__}",
            hint='e.g. {"job": "reports.nightly", "cron": "0 3 * * *"}')
        return None, found
    unknown = sorted(str(key) for key in spec if key not in KEYS)
    if unknown:
        bad(20, f"unknown key{'s' if len(unknown) > 1 else ''} {', '.join(unknown)}",
            hint=f"Known keys: {', '.join(KEYS)}.")
    task = spec.get("task")
    job_name = spec.get("job")
    if task is not None:
        if job_name is not None:
            bad(21, "it has both job and task; keep one")
        scheduled_task_job()
        job_name = SCHEDULED_TASK
    job = registry.find(job_name) if isinstance(job_name, str) else None
    if job is None:
        bad(21, "it names no job" if job_name is None else f"job {job_name!r} is not registered",
            hint="Name a job made with @job (its name, as `queue_status` shows it), or a "
            "task of Django's Tasks framework with the task key.")
    cron, every = spec.get("cron"), spec.get("every")
    period = None
    if (cron is None) == (every is None):
        bad(22, "it needs exactly one of cron and every" if cron is None else
            "it has both cron and every; keep one")
    elif cron is not None:
        problem = cron_problem(cron)
        if problem:
            bad(22, problem, hint="e.g. '0 3 * * *' (03:00 each day) or '@hourly'.")
    else:
        period = _seconds(every)
        if period is None or period < EVERY_MIN:
            bad(22, f"every must be seconds (at least {EVERY_MIN.total_seconds():g}) or a "
                    f"timedelta, got {every!r}")
    zone_name = spec.get("timezone", getattr(django_settings, "TIME_ZONE", None) or "UTC")
    zone = None
    try:
        zone = ZoneInfo(zone_name) if isinstance(zone_name, str) and zone_name else None
    except (ZoneInfoNotFoundError, ValueError):
        zone = None
    if zone is None:
        bad(23, f"timezone {zone_name!r} is not an IANA zone",
            hint="e.g. 'Europe/Paris'; the default is TIME_ZONE.")
    missed = spec.get("missed", "skip")
    if missed not in MISSED:
        bad(25, f"missed is {missed!r}; allowed: {', '.join(map(repr, MISSED))}")
    missed_limit = spec.get("missed_limit", MISSED_LIMIT)
    limit_problem = missed_limit_problem(missed_limit)
    if limit_problem:
        bad(25, limit_problem, hint=f"How many missed ticks missed='all' fires at most (the "
                                    f"newest); the default is {MISSED_LIMIT}.")
    overlap = spec.get("overlap", True)
    if not isinstance(overlap, bool):
        bad(26, f"overlap must be True or False, got {overlap!r}")
    queue = spec.get("queue")
    if queue is not None and (not isinstance(queue, str) or not queue or len(queue) > QUEUE_MAX):
        bad(26, f"queue must be a non-empty string of at most {QUEUE_MAX} characters, got "
                f"{queue!r}")
    args, kwargs = spec.get("args", ()), spec.get("kwargs", {})
    if not isinstance(args, list | tuple):
        bad(24, f"args must be a list, got {type(args).__name__}")
    elif not isinstance(kwargs, Mapping) or not all(isinstance(k, str) for k in kwargs):
        bad(24, "kwargs must be a dict with str keys")
    elif task is not None:
        task_found = task_problem(task, args, kwargs)
        if task_found is not None:
            bad(*task_found)
        else:
            try:
                payload.encode(str(task), args, kwargs)
            except (TypeError, InvalidPayload) as e:
                bad(24, str(e).rstrip("."))
    elif job is not None:
        try:
            job._check_arguments(args, kwargs)
            payload.encode(job.name, args, kwargs)
        except (TypeError, InvalidPayload) as e:
            bad(24, str(e).rstrip("."),
                hint="Give the arguments the job takes, as JSON values, in args/kwargs.")
    if found:
        return None, found
    assert zone is not None and isinstance(job_name, str)
    if task is not None:
        # The job that enqueues the task takes the task's call as its arguments.
        args, kwargs = (), {"task": task, "args": list(args), "kwargs": dict(kwargs)}
    return Schedule(
        name=name, job=job_name, cron=cron, every=period, args=tuple(args),
        kwargs=dict(kwargs), timezone=zone, missed=missed, missed_limit=missed_limit,
        overlap=overlap, queue=queue, task=task,
    ), found


def _collect() -> tuple[list[Schedule], list[ScheduleProblem]]:
    configured = getattr(django_settings, "LATERITE_QUEUE_SCHEDULES", {})
    if not isinstance(configured, Mapping):
        return [], [ScheduleProblem(
            20, f"LATERITE_QUEUE_SCHEDULES is {configured!r}; it must be a dict of schedule "
                f"names to definitions.")]
    built: list[Schedule] = []
    found: list[ScheduleProblem] = []
    seen: dict[str, str] = {}
    for name, spec, where in _definitions():
        if isinstance(name, str) and name in seen:
            found.append(ScheduleProblem(
                27, f"Schedule {name!r} is defined twice: in {seen[name]} and in {where}.",
                "Give one of them another name."))
            continue
        if isinstance(name, str):
            seen[name] = where
        schedule, problems_here = _check(name, spec)
        found += problems_here
        if schedule is not None:
            built.append(schedule)
    return built, found


def problems() -> list[ScheduleProblem]:
    """Everything wrong with the configured schedules (the system check's list)."""
    return _collect()[1]


def schedules() -> list[Schedule]:
    """Every configured schedule, checked; the first problem raises
    LateriteConfigurationError naming its schedule."""
    built, found = _collect()
    if found:
        raise LateriteConfigurationError(found[0].message)
    return built


def find(name: str) -> Schedule:
    """The configured schedule `name`; LateriteConfigurationError if there is none."""
    for schedule in schedules():
        if schedule.name == name:
            return schedule
    known = ", ".join(repr(s.name) for s in schedules()) or "none"
    raise LateriteConfigurationError(f"No schedule is named {name!r} (configured: {known}).")
