"""List the failed jobs: `manage.py queue_failed [--json] [--queue Q] [--limit N]`."""

from __future__ import annotations

import json

from ...stores import get_store
from ..arguments import positive_int
from ..store_check import StoreCommand
from ..wording import shorten

# The table shows this much of each error's first line; --json shows it all.
ERROR_WIDTH = 100


class Command(StoreCommand):
    help = "List failed jobs, newest first, with the ids queue_retry and queue_forget take."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--json", action="store_true", help="Print JSON, full errors included.")
        parser.add_argument("--queue", help="Only this queue.")
        parser.add_argument("--name", help="Only jobs of this name.")
        parser.add_argument("--limit", type=positive_int, default=100, help="At most this many.")

    def handle(self, *args, **options) -> None:
        rows = get_store().failed_jobs(
            queue=options["queue"], name=options["name"], limit=options["limit"]
        )
        if options["json"]:
            data = [
                {
                    "id": row.id, "job_id": row.job_id, "name": row.name, "queue": row.queue,
                    "attempts": row.attempts, "pushed_at": row.pushed_at.isoformat(),
                    "failed_at": row.failed_at.isoformat(), "payload": row.payload,
                    "error": row.error,
                }
                for row in rows
            ]
            self.stdout.write(json.dumps(data, indent=2))
            return
        if not rows:
            self.stdout.write("No failed jobs.")
            return
        header = ("id", "name", "queue", "attempts", "failed at", "error")
        table = [
            (str(row.id), row.name, row.queue, str(row.attempts),
             row.failed_at.strftime("%Y-%m-%d %H:%M:%S"),
             shorten(row.error_summary, ERROR_WIDTH))
            for row in rows
        ]
        widths = [max(len(r[i]) for r in [header, *table]) for i in range(len(header) - 1)]
        for line in [header, *table]:
            cells = [cell.ljust(w) for cell, w in zip(line[:-1], widths, strict=True)]
            self.stdout.write("  ".join([*cells, line[-1]]))
