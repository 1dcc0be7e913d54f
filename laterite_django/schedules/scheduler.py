"""The scheduler: at each tick of a schedule, push its job through the store, once.

Every `queue_work` runs one (its supervisor with --processes > 1, the worker's
process with --processes 1), and so does the `worker` mode: there is no leader.
They all follow the same plan (plan.py) and fire through
`Store.fire_schedule`, whose compare-and-set of the schedule's cursor and push
of the job are one atomic step, so each tick is pushed by exactly one of them.
`Scheduler.step()` does one round and says how long to sleep; `SchedulerThread`
runs rounds in a thread, the supervisor calls them from its own loop.

A schedule starts from the moment its definition last changed: its first
sight, a change of its rule (cron, every, timezone), or its return to the
settings. A scheduler of the configured schedules first marks every other
state in the store as removed (`Store.remove_schedules`), and each round
restarts the schedules whose stored rule differs from theirs
(`Store.define_schedules`): no catching up across a change.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from datetime import datetime

from django.utils import timezone

from .. import payload
from ..core.backoff import Growing
from ..core.values import NewJob
from ..exceptions import StoreUnavailable
from ..stores import Store, get_store
from ..stores.errors import drop_connections
from ..stores.schedule_state import Fired, ScheduleFire
from .definition import Schedule, schedules
from .plan import plan

__all__ = ["MAX_SLEEP", "Scheduler", "SchedulerThread", "new_job"]

logger = logging.getLogger("laterite")

# The longest a scheduler sleeps: it looks at the clock (and the store) this often.
MAX_SLEEP = 1.0
# The shortest: a tick due now is fired at once, but never in a busy loop.
MIN_SLEEP = 0.01


def new_job(schedule: Schedule, tick: datetime) -> NewJob:
    """The job a schedule pushes for `tick`: its job, arguments and queue, with the
    schedule's name and the tick in its payload (cx.schedule, cx.scheduled_at)."""
    job = schedule.job_function()
    (new,) = job.new_jobs([(schedule.args, schedule.kwargs)], queue=schedule.queue)
    new.payload = payload.with_schedule(new.payload, schedule.name, tick)
    return new


class Scheduler:
    """Fires the due ticks of `schedules` (default: every configured one) through `store`."""

    def __init__(
        self,
        schedules_: Sequence[Schedule] | None = None,
        *,
        store: Store | None = None,
        clock: Callable[[], datetime] = timezone.now,
    ) -> None:
        self.schedules = list(schedules() if schedules_ is None else schedules_)
        # Only a scheduler of the whole configuration knows which schedules are gone.
        self._sweep = schedules_ is None
        self._store = store
        self.clock = clock
        self._waits = Growing(0.5, cap=30.0)
        self._down = False

    @property
    def store(self) -> Store:
        return self._store or get_store()

    def step(self) -> float:
        """Fire every due tick; return the seconds until the next one (at most MAX_SLEEP)."""
        if self._sweep:
            self.sweep()
        if not self.schedules:
            return MAX_SLEEP
        store, now = self.store, self.clock()
        names = [s.name for s in self.schedules]
        states = store.schedule_states(names)
        missing = [name for name in names if name not in states]
        if missing:
            # First seen now: the ticks before this moment were not its to fire.
            store.add_schedules(missing, now)
        changed = {s.name: s.rule_hash for s in self.schedules
                   if s.name in missing or states[s.name].rule_hash != s.rule_hash}
        if changed:
            for name in store.define_schedules(changed, now):
                logger.info("Schedule %s: its rule changed, or it is back in the settings; "
                            "its ticks start from now", name,
                            extra={"action": "schedule_restarted", "schedule": name})
            states = store.schedule_states(names)
        for schedule in self.schedules:
            state = states.get(schedule.name)
            if state is None or state.paused:
                continue
            try:
                self._catch_up(store, schedule, state.last_tick or now, now)
            except StoreUnavailable:
                raise
            except Exception:
                logger.exception("Schedule %s could not fire", schedule.name,
                                 extra={"action": "schedule_error", "schedule": schedule.name})
        return self._sleep()

    def sweep(self) -> None:
        """Mark the store's schedules that are not configured as removed (once): one that
        comes back starts from its return, not from its old cursor."""
        self.store.remove_schedules([s.name for s in self.schedules])
        self._sweep = False

    def sweep_quietly(self) -> None:
        """Sweep if it is still to be done, logging an error rather than raising it: for
        a process with no schedule to fire, whose start a store down must not stop."""
        if not self._sweep:
            return
        try:
            self.sweep()
        except Exception as e:
            logger.warning("Scheduler: the removed schedules could not be marked: %s", e,
                           extra={"action": "schedule_sweep_error"})

    def round(self) -> float:
        """One step that never raises: a store that is down is said once and waited for
        (growing pauses), any other error logged. Return the seconds to wait."""
        try:
            wait = self.step()
        except StoreUnavailable as e:
            if not self._down:
                logger.error("Scheduler: store unavailable: %s", e,
                             extra={"action": "store_unavailable"})
            self._down = True
            drop_connections(self.store)
            return self._waits.next()
        except Exception:
            logger.exception("Scheduler error", extra={"action": "scheduler_error"})
            drop_connections(self.store)
            return self._waits.next()
        if self._down:
            logger.info("Scheduler: store available again", extra={"action": "store_back"})
            self._down = False
        self._waits.reset()
        return wait

    def _catch_up(self, store: Store, schedule: Schedule, cursor: datetime,
                  now: datetime) -> None:
        for tick, fire in plan(schedule, cursor, now):
            job = new_job(schedule, tick) if fire else None
            fired = store.fire_schedule(ScheduleFire(
                schedule.name, tick, job, skip_if_running=not schedule.overlap))
            self._log(schedule, tick, fired)
            if fired.outcome == "paused":
                return

    def _log(self, schedule: Schedule, tick: datetime, fired: Fired) -> None:
        extra = {"action": f"schedule_{fired.outcome}", "schedule": schedule.name,
                 "tick": tick.isoformat(), "id": fired.id}
        if fired.outcome == "pushed":
            logger.info("Schedule %s: pushed job %s #%s for %s", schedule.name, schedule.job,
                        fired.id, tick.isoformat(), extra=extra)
        elif fired.outcome == "overlap":
            logger.info("Schedule %s: tick %s skipped, its previous job still waits or runs",
                        schedule.name, tick.isoformat(), extra=extra)
        elif fired.outcome == "advanced":
            logger.warning("Schedule %s: missed ticks up to %s skipped", schedule.name,
                           tick.isoformat(), extra=extra)

    def _sleep(self) -> float:
        now = self.clock()
        upcoming = [t for t in (s.ticks.next_after(now) for s in self.schedules) if t]
        if not upcoming:
            return MAX_SLEEP
        return min(MAX_SLEEP, max(MIN_SLEEP, (min(upcoming) - now).total_seconds()))


class SchedulerThread:
    """Runs a Scheduler's rounds in a daemon thread until stopped (queue_work with one
    process, and the `worker` mode). A store that is down is waited for."""

    def __init__(self, scheduler: Scheduler | None = None) -> None:
        self.scheduler = scheduler or Scheduler()
        self.stopping = threading.Event()
        self.thread: threading.Thread | None = None

    def start(self) -> SchedulerThread:
        if not self.scheduler.schedules:
            self.scheduler.sweep_quietly()
        else:
            self.thread = threading.Thread(target=self._loop, name="laterite-scheduler",
                                           daemon=True)
            self.thread.start()
        return self

    def stop(self, wait: float = 5.0) -> None:
        self.stopping.set()
        if self.thread is not None and self.thread is not threading.current_thread():
            self.thread.join(wait)

    def _loop(self) -> None:
        try:
            while not self.stopping.is_set():
                self.stopping.wait(self.scheduler.round())
        finally:
            from django.db import connections

            connections.close_all()
