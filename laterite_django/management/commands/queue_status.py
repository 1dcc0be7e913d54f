"""Show what waits: `manage.py queue_status [--json]` (waiting, delayed, running, failed per queue).

Then the running jobs (of the first 50) that reported their progress (`cx.progress`);
in `--json`, each queue's `running_jobs` (with `progress`, or null).

`--json` also prints each queue's counts under the names of 0.1, `pending`
(= waiting) and `reserved` (= running), for one more release.
"""

from __future__ import annotations

import argparse
import json

from django.core.management.base import CommandError

from ...conf import settings
from ...core.values import QueueCounts, Running
from ...exceptions import StoreUnavailable
from ...stores import get_store
from ..arguments import positive_float, positive_int
from ..store_check import StoreCommand
from ..watch import watch

# The running jobs listed (with their progress), the oldest first.
RUNNING_SHOWN = 50


class Command(StoreCommand):
    help = (
        "Show per queue how many jobs are waiting, delayed, running and failed: every "
        "queue of LATERITE_QUEUE_QUEUES, and any other queue that has jobs."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("--json", action="store_true", help="Print JSON instead of a table.")
        parser.add_argument(
            "--watch", action="store_true",
            help="Redraw the status every second (--interval) with each queue's oldest "
            "waiting job and its jobs succeeded and failed per minute, until Ctrl-C.")
        parser.add_argument("--interval", type=positive_float, default=1.0, metavar="SECONDS",
                            help="With --watch: seconds between two frames (default 1).")
        parser.add_argument("--frames", type=positive_int, help=argparse.SUPPRESS)

    def handle(self, *args, **options) -> None:
        store = get_store()
        if options["watch"]:
            try:
                store.ping()
            except StoreUnavailable:
                raise  # one line, by StoreCommand
            watch(store, lambda text: self.stdout.write(text), interval=options["interval"],
                  frames=options["frames"])
            return
        try:
            store.ping()
            found = store.counts()
            running = store.running(RUNNING_SHOWN)
            paused = store.paused_queues()
        except StoreUnavailable:
            raise  # one line, by StoreCommand
        except Exception as e:
            raise CommandError(f"The queue store cannot be read: {e}") from e
        # The configured queues first, in their order, at zero if empty; then the others.
        counts = {queue: found.get(queue, QueueCounts()) for queue in settings.QUEUES}
        counts.update(sorted(found.items()))
        counts.update((queue, QueueCounts()) for queue in sorted(paused) if queue not in counts)
        if options["json"]:
            data = {
                queue: {"waiting": c.waiting, "delayed": c.delayed, "running": c.running,
                        "failed": c.failed, "paused": queue in paused,
                        # The names of 0.1, kept for one more release (see CHANGELOG).
                        "pending": c.waiting, "reserved": c.running,
                        "running_jobs": [_running_json(r) for r in running if r.queue == queue]}
                for queue, c in counts.items()
            }
            self.stdout.write(json.dumps(data, indent=2))
            return
        header = ("queue", "waiting", "delayed", "running", "failed", "")
        rows = [
            (queue, str(c.waiting), str(c.delayed), str(c.running), str(c.failed),
             "paused" if queue in paused else "")
            for queue, c in counts.items()
        ]
        widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
        for row in [header, *rows]:
            self.stdout.write(
                "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())
        self.stdout.write(f"failed total: {sum(c.failed for c in counts.values())}")
        said = [r for r in running if r.progress is not None]
        if said:
            self.stdout.write("progress of running jobs:")
            for r in said:
                assert r.progress is not None
                self.stdout.write(f"  #{r.id} {r.name} on {r.queue} (attempt {r.attempts}, "
                                  f"{r.claimed_by or 'unknown worker'}): "
                                  f"{r.progress.describe()}")


def _running_json(job: Running) -> dict:
    progress = job.progress
    return {"id": job.id, "name": job.name, "attempts": job.attempts,
            "claimed_by": job.claimed_by,
            "progress": None if progress is None else {
                "done": progress.done, "total": progress.total, "note": progress.note,
                "at": progress.at.isoformat() if progress.at else None}}
