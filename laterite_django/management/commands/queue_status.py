"""Show what waits: `manage.py queue_status [--json]` (waiting, delayed, running, failed per queue).

`--json` also prints each queue's counts under the names of 0.1, `pending`
(= waiting) and `reserved` (= running), for one more release.
"""

from __future__ import annotations

import json

from django.core.management.base import CommandError

from ...conf import settings
from ...exceptions import StoreUnavailable
from ...stores import QueueCounts, get_store
from ..store_check import StoreCommand


class Command(StoreCommand):
    help = (
        "Show per queue how many jobs are waiting, delayed, running and failed: every "
        "queue of LATERITE_QUEUE_QUEUES, and any other queue that has jobs."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("--json", action="store_true", help="Print JSON instead of a table.")

    def handle(self, *args, **options) -> None:
        store = get_store()
        try:
            store.ping()
            found = store.counts()
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
                        "pending": c.waiting, "reserved": c.running}
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
