"""The worker: claim the next due jobs, run each under its timeout, settle it.

The loop and its batches live here; what happens to a job after an attempt is
decided by `rules`, carried out by `settle`, and one attempt is run by
`attempt`. Nothing a job, its options or a signal receiver does stops the loop.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from django.db import close_old_connections

from ..conf import settings
from ..core.backoff import Growing
from ..core.crash_points import crash_point
from ..core.minutes import MinuteCounts
from ..core.progress import ProgressDesk
from ..core.values import Claim
from ..exceptions import StoreUnavailable
from ..flow.cancel import Lookout
from ..flow.limits import claim_share, limits_of
from ..flow.pause import PausedView
from ..signals import job_succeeded
from ..stores import Store, get_store
from ..stores.errors import drop_connections
from .attempt import WorkerStopped, run_claim
from .execute import interrupt
from .hand import Hand
from .heartbeat import Heartbeat
from .held import HeldJobs
from .idle import IdleWaiting
from .latency import LatencySampler
from .memory import limit_reached
from .outage import Outage
from .presence import Presence
from .reports import Monitor
from .settle import Settled, Settler

if TYPE_CHECKING:
    from .tally import Tally

__all__ = ["Worker", "WorkerStopped", "default_worker_name"]

logger = logging.getLogger("laterite")

# How long a worker keeps trying to settle a finished job while its store is down.
SETTLE_PATIENCE = 60.0
# A batch grows while its jobs run faster than this, and shrinks when slower, so
# claimed jobs never wait long behind the one running.
FAST_BATCH = 0.05
SLOW_BATCH = 0.25
# Finished jobs are deleted with the next claim, or after this long at the latest;
# a job running longer than this has the rest of its batch taken off its hands.
FLUSH_AFTER = 0.05
# ... or once this many have finished while more of the batch wait: a claim may take
# more jobs than this (a claim's cost is mostly per statement), but a worker killed or
# cut off runs again at most this many finished jobs, whatever its batch.
SETTLE_EVERY = 20


def default_worker_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


class Worker(HeldJobs, IdleWaiting):
    """Claim, run and settle jobs from `queues` until told to stop or a limit is hit."""

    def __init__(
        self,
        queues: Sequence[str] | None = None,
        *,
        name: str | None = None,
        store: Store | None = None,
        batch: int = 1,
        once: bool = False,
        stop_when_empty: bool = False,
        max_jobs: int | None = None,
        max_seconds: float | None = None,
        sleep: float | None = None,
        retry_after: float | None = None,
        max_memory: int | None = None,
        monitor: Monitor | None = None,
        wait_delayed: float = 0,
        manage_connections: bool = True,
        presence: Presence | None = None,
    ) -> None:
        self.queues = list(queues or settings.QUEUES)
        self.name = name or default_worker_name()
        self.store = store or get_store()
        self.batch = max(1, batch)  # the most jobs one claim takes
        self._limit = 1  # what the next claim asks for: grows while the queue is deep
        self.once = once
        self.stop_when_empty = stop_when_empty
        # With stop_when_empty: also wait for a delayed job due within this many seconds.
        self.wait_delayed = wait_delayed
        # False: run on the caller's connections and transaction (testing.run_jobs): close
        # no connection, start no heartbeat thread (it needs a connection of its own), and
        # let a store error raise instead of waiting for the store to come back.
        self.manage_connections = manage_connections
        self.max_jobs = max_jobs
        self.max_seconds = max_seconds
        self.sleep = settings.POLL if sleep is None else sleep
        self.retry_after = float(settings.RETRY_AFTER if retry_after is None else retry_after)
        self.max_memory = max_memory  # bytes
        self.monitor = monitor or Monitor()
        # Counts for the metrics (queue_work --metrics-port); None: nothing counted.
        self.tally: Tally | None = None
        # Successes and failures per minute, for the admin's overview.
        self.minutes = MinuteCounts()
        self.processed = 0
        self.stopping = threading.Event()
        self.stop_reason = ""
        self._stop_now = False
        self.in_job = False  # True while a job's own code runs (a second signal then raises)
        self.tidied_after_job = False  # the last job's end tidied the connections (_run)
        self.hand = Hand()
        # What the running job says of its progress, written by the heartbeat thread.
        self.progress = ProgressDesk(self.hand.changed)
        self.settler = Settler(self.store, patience=SETTLE_PATIENCE,
                               stop_now=lambda: self._stop_now,
                               on_unavailable=lambda: drop_connections(self.store))
        # Cancels of the running job, looked for by the heartbeat (flow.cancel).
        self.lookout = Lookout(self.store, on_ask=self.monitor.cancel, interrupt=interrupt)
        beat_every = max(0.2, self.retry_after / 3)
        # This process's entry in the live workers' list, written with the heartbeat;
        # none for a worker on the caller's connections (testing.run_jobs).
        if presence is None and manage_connections:
            presence = Presence(self.name, self.queues, every=beat_every)
        self.presence = presence
        self.heartbeat = Heartbeat(self.store, self.hand, interval=beat_every,
                                   slow_after=FLUSH_AFTER, relieve=self._relieve,
                                   progress=self.progress, lookout=self.lookout,
                                   presence=presence,
                                   latency=LatencySampler(self.queues) if manage_connections
                                   else None)
        # The paused queues, read again at most every `sleep` seconds (flow.pause).
        self.paused = PausedView(self.store, every=self.sleep)
        self._next_sweep = 0.0
        self.outage = Outage(self.name, self.stopping)
        self._started = time.monotonic()

    # -- control --------------------------------------------------------------------

    def stop(self) -> None:
        """Finish the jobs in hand, claim no more."""
        self.stop_reason = self.stop_reason or "stopped"
        self._raise_stopping()

    def stop_now(self) -> None:
        """Stop the running job now and give the jobs in hand back to their queues.

        Call it from a signal handler in the worker's thread: it raises
        WorkerStopped there if a job is running; otherwise the loop returns
        its claims before it runs another.
        """
        self.stop_reason = "stopped"
        self._stop_now = True
        self._raise_stopping()
        if self.in_job:
            raise WorkerStopped

    def _raise_stopping(self) -> None:
        """Set `stopping`; on the main thread from another one, as a signal handler may
        have interrupted `stopping.wait()` holding the event's lock (a deadlock)."""
        if threading.current_thread() is threading.main_thread():
            with contextlib.suppress(RuntimeError):  # no new threads at interpreter exit
                threading.Thread(target=self.stopping.set, daemon=True).start()
                return
        self.stopping.set()

    @property
    def stopped_now(self) -> bool:
        return self._stop_now

    def _limit_reached(self) -> bool:
        """Say whether a limit stops this worker, and record which in `stop_reason`."""
        reason = limit_reached(self.max_jobs, self.max_seconds, self.max_memory,
                               self.processed, time.monotonic() - self._started)
        self.stop_reason = reason or self.stop_reason
        return reason is not None

    # -- the loop -------------------------------------------------------------------

    def run(self) -> int:
        """Work until stopped or done; return the number of jobs handled."""
        self._started = time.monotonic()
        if self.manage_connections:
            self.heartbeat.start()
            self.store.work_in_background()
        if self.presence is not None:
            self.presence.join(self.store, self.hand)
        logger.info(
            "Worker %s started on queues %s", self.name, ", ".join(self.queues),
            extra={"action": "worker_started", "worker": self.name, "queues": self.queues},
        )
        waits = Growing(0.5, cap=30.0)
        try:
            while not self.stopping.is_set() and not self._limit_reached():
                try:
                    done = self._round()
                    self.outage.back()
                    if done:
                        break
                    waits.reset()
                except WorkerStopped:
                    raise
                except StoreUnavailable as e:
                    if not self.manage_connections:
                        raise
                    # Claims not started are let go: they expire and return to their
                    # queues after retry_after, without the attempt (position > 0).
                    self.hand.clear()
                    self.outage.down(e, waits.next())
                    drop_connections(self.store)
                except BaseException as e:  # nothing may end the loop
                    self._give_back(self.hand.take_unstarted())
                    self.hand.clear()
                    self.outage.worker_error(e, waits.next())
        except WorkerStopped:
            pass
        finally:
            self._leave()
        return self.processed

    def _round(self) -> bool:
        """Claim and run one batch; return True when the worker is done."""
        self.hand.wait_given_back()  # a slow job's batch, given back by the heartbeat
        if self.manage_connections:
            close_old_connections()
        if self._quiet():
            # Nothing can have been claimed or fallen due since the store last looked:
            # no sweep, no claim, nothing asked of the store; wait on.
            claims = self._wait_for_work()
            if not claims:
                return False
            self.run_claims(claims)
            return False
        self._sweep()
        finished = self.hand.take_finished()
        queues = self.paused.active(self.queues)
        if finished:
            crash_point("delete.before")
        try:
            claims = self.store.settle_and_claim(
                finished, queues, self.name, self._claim_limit(), limits_of(queues))
        except BaseException:
            self.hand.put_back_finished(finished)
            raise
        if finished:
            crash_point("delete.after")
        self._deleted(finished)
        self.outage.back()  # said now, not after an idle wait
        if not claims and self.store.flush():
            return False  # what the store put off pushed jobs (a batch's callbacks)
        if not claims:
            if self.stop_when_empty and self._wait_for_delayed():
                return False
            if self.tally is not None:
                self.tally.flush()  # idle: the counts are seen now, not at the next job
            self._write_minutes()
            if self.stop_when_empty or self.once:
                self.stop_reason = "empty"
                return True
            if len(queues) < len(self.queues):
                # A queue is paused: look again within `sleep`, so its resume is seen then
                # at the latest (a push to a queue served meanwhile still wakes it).
                if queues:
                    self.store.wait(queues, self.sleep, self.stopping)
                else:
                    self.stopping.wait(self.sleep)
                self.paused.expire()  # woken (a resume wakes too): read them again
                return False
            claims = self._wait_for_work()
            if not claims:
                return False
        self.run_claims(claims)
        if self.once:
            self.stop_reason = "once"
            return True
        return False

    def _leave(self) -> None:
        """Delete the finished jobs, give back the rest, stop the heartbeat, say so."""
        try:
            self._flush()
        except Exception:
            logger.exception("Could not delete finished jobs; they may run again")
        self._give_back(self.hand.take_unstarted())
        with contextlib.suppress(Exception):
            self.store.flush()
        self.heartbeat.stop()
        if self.tally is not None:
            self.tally.flush()
        self._write_minutes()
        if self.presence is not None:
            self.presence.leave(self.store, self.hand)
        if self.manage_connections:
            with contextlib.suppress(Exception):
                self.store.close()  # this thread's connections, its LISTEN one included
        reason = self.stop_reason or "stopped"
        self.monitor.exit(reason)
        logger.info(
            "Worker %s stopped after %d job%s (%s)", self.name, self.processed,
            "" if self.processed == 1 else "s", reason,
            extra={"action": "worker_stopped", "worker": self.name, "jobs": self.processed,
                   "reason": reason},
        )

    def _claim_limit(self) -> int:
        if self.once:
            return 1
        limit = self._limit
        share = claim_share(self.queues)
        if share is not None:
            limit = min(limit, share)
        if self.max_jobs is not None:
            return max(1, min(limit, self.max_jobs - self.processed))
        return limit

    def run_claims(self, claims: list[Claim]) -> None:
        """Run a batch of claimed jobs in order; give back the rest if told to stop."""
        crash_point("claim.after")  # claimed, none started
        asked = self._claim_limit()
        started = time.monotonic()
        self.monitor.hold(claims)
        self.hand.take(claims)
        first = True
        tidy = False  # see run_claim
        while not (self.stopping.is_set() and (not first or self._stop_now)):
            claim = self.hand.next()
            if claim is None:
                break
            first = False
            settled = run_claim(self, claim, tidy)
            self.processed += 1
            # A success is settled later, in bulk: nothing used a connection since the
            # job's end (but a receiver of job_succeeded).
            tidy = (settled == Settled.SUCCEEDED and self.tidied_after_job
                    and not job_succeeded.receivers)
            if self.hand.finished_for() > FLUSH_AFTER or self.hand.settle_due(SETTLE_EVERY):
                self._flush()
                tidy = False
        self._give_back(self.hand.take_unstarted())
        if self.minutes.due():
            self._write_minutes()
        # Claim more at once while the queue is deep and its jobs are quick.
        per_batch = time.monotonic() - started
        if len(claims) >= asked and per_batch < FAST_BATCH:
            self._limit = min(self.batch, self._limit * 2)
        elif len(claims) < asked or per_batch > SLOW_BATCH:
            self._limit = max(1, self._limit // 2)
