"""A thread that keeps a worker's claims fresh and keeps a slow job from holding others.

Every `interval` seconds it refreshes the claims in hand, so a long job is never
taken for abandoned while its worker lives. While a job runs with others in
hand, it also looks every few milliseconds: once that job has run longer than
`slow_after`, it calls `relieve` (delete the finished jobs, give back the ones
not started). And it stores what the running job says of its progress
(`cx.progress`), at most once a second per job, so the job never waits on that.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from django.db import close_old_connections, connections

from ..core.crash_points import crash_point
from ..core.progress import ProgressDesk
from ..exceptions import StoreUnavailable
from ..flow.cancel import Lookout
from ..stores import Store
from .hand import Hand
from .latency import LatencySampler
from .presence import Presence

__all__ = ["Heartbeat"]

logger = logging.getLogger("laterite")

# How often the heartbeat looks at a running job while others wait in hand.
LOOK = 0.02
# The longest the heartbeat sleeps while no job runs, so a job that starts meanwhile
# is asked about cancels about a second after its start (flow.cancel).
LOOKOUT_IDLE = 1.0


class Heartbeat:
    """The worker's second thread: heartbeats, and relief from a slow job."""

    def __init__(
        self,
        store: Store,
        hand: Hand,
        *,
        interval: float,
        slow_after: float,
        relieve: Callable[[], None],
        progress: ProgressDesk | None = None,
        lookout: Lookout | None = None,
        presence: Presence | None = None,
        latency: LatencySampler | None = None,
    ) -> None:
        self.store = store
        self.hand = hand
        self.interval = interval
        self.slow_after = slow_after
        self.relieve = relieve
        self.progress = progress
        self.lookout = lookout  # cancels of the running job (flow.cancel)
        self.presence = presence  # this process's entry in the live workers' list
        self.latency = latency  # the queues' latency, sampled once a minute (overview)
        # When this thread last turned (monotonic): it turns every second or so while it
        # lives, whatever the jobs do (queue_work --health-port's /livez reads it).
        self.turned_at = time.monotonic()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        thread = threading.Thread(target=self._run, name="laterite-heartbeat", daemon=True)
        thread.start()
        # Kept once running: `stuck` (another thread's /livez) must never see it made but
        # not yet started, which would read as stopped.
        self._thread = thread

    def stop(self) -> None:
        self._stop.set()
        self.hand.changed.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def stuck(self, within: float) -> str | None:
        """Why this thread is not turning (stopped, or no turn for `within` seconds), or
        None: it turns, or has not started yet (queue_work --health-port's /livez)."""
        if self._thread is None:
            return None
        if not self._thread.is_alive():
            return "the worker's heartbeat thread has stopped"
        late = time.monotonic() - self.turned_at
        if late > within:
            return f"the worker's heartbeat thread has not turned for {late:.0f} s"
        return None

    def _run(self) -> None:
        next_beat = time.monotonic() + self.interval
        try:
            while not self._stop.is_set():
                self.turned_at = time.monotonic()
                wait = next_beat - time.monotonic()
                if self.hand.busy():
                    wait = min(wait, LOOK)
                progress_in = self.progress.wait() if self.progress is not None else None
                if progress_in is not None:
                    wait = min(wait, progress_in)
                due = self.lookout.due_in() if self.lookout is not None else None
                if due is not None:
                    wait = min(wait, max(due, 0.01))
                elif self.lookout is not None:
                    wait = min(wait, LOOKOUT_IDLE)  # a job may start meanwhile
                if wait > 0:
                    self.hand.changed.wait(wait)
                    self.hand.changed.clear()
                if self._stop.is_set():
                    return
                if self.hand.slow_job(self.slow_after):
                    self._guarded(self.relieve, "Could not relieve a slow batch")
                if self.lookout is not None and self.lookout.due_in() == 0.0:
                    close_old_connections()
                    self._guarded(self.lookout.look, "Could not look for cancels")
                if time.monotonic() >= next_beat:
                    next_beat = time.monotonic() + self.interval
                    self._guarded(self._beat, "Heartbeat failed; will try again")
                if progress_in is not None:
                    self._guarded(self._save_progress, "Could not save a job's progress")
                if self.latency is not None and self.latency.due():
                    self._guarded(self._sample_latency, "Could not sample the queues' latency")
        finally:
            self.store.close()
            connections.close_all()

    def _beat(self) -> None:
        claims = self.hand.held()
        if claims:
            close_old_connections()
            self.store.heartbeat(claims)
            crash_point("heartbeat.after_beat")  # the job runs on, its claim refreshed
        if self.presence is not None:
            close_old_connections()
            self.presence.beat(self.store)

    def _sample_latency(self) -> None:
        assert self.latency is not None
        close_old_connections()
        self.latency.sample(self.store)

    def _save_progress(self) -> None:
        assert self.progress is not None
        items = self.progress.due()
        if items:
            close_old_connections()
            self.store.save_progress(items)

    def _guarded(self, action: Callable[[], None], message: str) -> None:
        """Run `action`; log its failure and go on. A store that cannot be reached is
        said in one line (it says where and why): a partition of a minute would
        otherwise write a traceback at every beat."""
        try:
            action()
        except StoreUnavailable as e:
            logger.warning("%s: %s", message, e, extra={"action": "heartbeat_failed"})
        except Exception:
            logger.exception(message, extra={"action": "heartbeat_failed"})
