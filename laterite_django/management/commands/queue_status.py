"""Show what waits: `manage.py queue_status` (pending, delayed, reserved per queue; failed)."""

from __future__ import annotations

import json

from django.core.management.base import BaseCommand, CommandError

from ...exceptions import StoreUnavailable
from ...stores import get_store


class Command(BaseCommand):
    help = "Show per queue how many jobs are pending, delayed, reserved and failed."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--json", action="store_true", help="Print JSON instead of a table.")

    def handle(self, *args, **options) -> None:
        store = get_store()
        try:
            store.ping()
            counts = store.counts()
        except StoreUnavailable as e:
            raise CommandError(str(e)) from e
        except Exception as e:
            raise CommandError(f"The queue store cannot be read: {e}") from e
        if options["json"]:
            data = {
                queue: {"pending": c.pending, "delayed": c.delayed, "reserved": c.reserved,
                        "failed": c.failed}
                for queue, c in counts.items()
            }
            self.stdout.write(json.dumps(data, indent=2))
            return
        header = ("queue", "pending", "delayed", "reserved", "failed")
        rows = [
            (queue, str(c.pending), str(c.delayed), str(c.reserved), str(c.failed))
            for queue, c in counts.items()
        ]
        widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
        for row in [header, *rows]:
            self.stdout.write("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)))
        if not rows:
            self.stdout.write("(no jobs)")
        self.stdout.write(f"failed total: {sum(c.failed for c in counts.values())}")
