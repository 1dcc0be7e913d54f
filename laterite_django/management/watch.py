"""`queue_status --watch`: the status redrawn every second in a terminal, with rates.

Each frame reads the store as `queue_status` does, plus the oldest waiting job's
age and the per-minute counts the workers write (see `minutes`): the rates are
jobs succeeded and failed per minute over the last five minutes.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime, timedelta

from django.utils import timezone

from ..conf import settings
from ..core.values import QueueCounts
from ..stores import Store
from ..worker.attempt import for_humans

__all__ = ["frame", "watch"]

# The rates' window.
WINDOW = timedelta(minutes=5)
# Clear the screen and go home (ANSI), before each frame.
CLEAR = "\x1b[H\x1b[2J"


def frame(store: Store, now: datetime | None = None) -> str:
    """One screen of status: per queue its counts, oldest waiting job and rates."""
    now = now or timezone.now()
    found = store.counts()
    oldest = store.oldest_waiting()
    since = now - WINDOW
    minutes = store.minutes(since)
    running = [r for r in store.running(20) if r.progress is not None]
    counts = {queue: found.get(queue, QueueCounts()) for queue in settings.QUEUES}
    counts.update(sorted(found.items()))
    for m in minutes:
        counts.setdefault(m.queue, QueueCounts())
    # The window's minutes so far: five whole ones and the current one's part.
    span = WINDOW.total_seconds() / 60 + now.second / 60
    header = ("queue", "waiting", "delayed", "running", "failed", "oldest waiting",
              "succeeded/min", "failed/min")
    rows = []
    for queue, c in counts.items():
        done = sum(m.succeeded for m in minutes if m.queue == queue)
        failed = sum(m.failed for m in minutes if m.queue == queue)
        age = oldest.get(queue)
        rows.append((queue, str(c.waiting), str(c.delayed), str(c.running), str(c.failed),
                     for_humans(max((now - age).total_seconds(), 0.0)) if age else "-",
                     f"{done / span:.1f}", f"{failed / span:.1f}"))
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    lines = [f"{timezone.localtime(now):%Y-%m-%d %H:%M:%S}  ({settings.STORE} store; "
             f"rates over the last {WINDOW.seconds // 60} min; Ctrl-C to stop)", ""]
    lines += ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
              for row in [header, *rows]]
    if running:
        lines += ["", "progress of running jobs:"]
        lines += [f"  #{r.id} {r.name} on {r.queue}: {r.progress.describe()}"
                  for r in running if r.progress is not None]
    return "\n".join(lines)


def watch(store: Store, write: Callable[[str], None], *, interval: float = 1.0,
          frames: int | None = None) -> None:
    """Write a frame every `interval` seconds until Ctrl-C (or `frames` frames)."""
    shown = 0
    try:
        while frames is None or shown < frames:
            started = time.monotonic()
            write(CLEAR + frame(store))
            shown += 1
            if frames is not None and shown >= frames:
                break
            time.sleep(max(0.0, interval - (time.monotonic() - started)))
    except KeyboardInterrupt:
        pass
