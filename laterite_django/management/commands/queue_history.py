"""Search the job history: `manage.py queue_history [--name N] [--queue Q] [--status S]
[--arg KEY=VALUE] [--since ISO] [--until ISO] [--limit N] [--scan N] [--json]`, or prune
it now: `manage.py queue_history --prune`."""

from __future__ import annotations

import argparse
import json
from datetime import datetime
from typing import Any

from django.core.management.base import CommandError

from ...conf import settings
from ...core.history import STATUSES
from ...stores import get_store
from ...stores.database.history import SCAN, prune_history, search
from ...stores.database.matching import parse_argument, parse_moment
from ..arguments import positive_int
from ..store_check import StoreCommand
from ..wording import shorten

ERROR_WIDTH = 60


def argument(text: str) -> tuple[str, Any]:
    """KEY=VALUE: VALUE read as JSON when it is (8812, true, "8812"), else as text."""
    try:
        return parse_argument(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from e


def moment(text: str) -> datetime:
    """An ISO 8601 date or date and time (UTC unless it says otherwise)."""
    try:
        return parse_moment(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from e


def as_json(record: Any) -> dict[str, Any]:
    def iso(value: datetime | None) -> str | None:
        return None if value is None else value.isoformat()

    return {
        "id": record.id, "job_id": record.job_id, "name": record.name, "queue": record.queue,
        "status": record.status, "args": record.args, "kwargs": record.kwargs,
        "encrypted": record.encrypted is not None, "attempts": record.attempts,
        "pushed_at": iso(record.pushed_at), "started_at": iso(record.started_at),
        "finished_at": iso(record.finished_at), "waited": record.waited, "ran": record.ran,
        "worker": record.worker, "error": record.error,
        "attempt_log": [{**entry, "started": iso(entry["started"]), "ended": iso(entry["ended"])}
                        for entry in record.attempt_list],
    }


class Command(StoreCommand):
    help = ("Search the job history (LATERITE_QUEUE_HISTORY), newest first; or prune it "
            "now with --prune.")

    def add_arguments(self, parser) -> None:
        parser.add_argument("--name", help="Only jobs of this name.")
        parser.add_argument("--queue", help="Only this queue.")
        parser.add_argument("--status", choices=STATUSES, help="Only jobs that ended so.")
        parser.add_argument(
            "--arg", type=argument, action="append", default=[], metavar="KEY=VALUE",
            help="Only jobs whose argument KEY (a keyword, or a position: 0, 1...) is VALUE "
                 "(JSON if it reads as JSON: order_id=8812 is the number). Repeatable.")
        parser.add_argument("--since", type=moment, help="Finished at or after (ISO 8601).")
        parser.add_argument("--until", type=moment, help="Finished before (ISO 8601).")
        parser.add_argument("--limit", type=positive_int, default=50, help="At most this many.")
        parser.add_argument(
            "--scan", type=positive_int, default=SCAN,
            help=f"An --arg filter looks through this many newest records the other "
                 f"filters keep, at most (default {SCAN:,}).")
        parser.add_argument("--json", action="store_true", help="Print JSON.")
        parser.add_argument("--prune", action="store_true",
                            help="Prune now: drop what is past its keep (and make the "
                                 "next days' partitions, on PostgreSQL).")

    def handle(self, *args: Any, **options: Any) -> None:
        database = get_store().database
        if options["prune"]:
            if settings.HISTORY is None:
                raise CommandError("LATERITE_QUEUE_HISTORY is not set: no history to prune.")
            deleted, made, dropped = prune_history(database)
            self.stdout.write(f"Deleted {deleted} record(s); partitions made: "
                              f"{', '.join(made) or 'none'}; dropped: "
                              f"{', '.join(dropped) or 'none'}.")
            return
        found, full = search(
            database, name=options["name"], queue=options["queue"],
            status=options["status"], arguments=options["arg"], since=options["since"],
            until=options["until"], limit=options["limit"], scan=options["scan"])
        if full:
            self.stderr.write(
                f"The argument filter looked through the {options['scan']:,} newest records "
                f"only; narrow it with --since, --name or --queue, or raise --scan.")
        if options["json"]:
            self.stdout.write(json.dumps([as_json(r) for r in found], indent=2))
            return
        if not found:
            self.stdout.write("No records." if settings.HISTORY is not None else
                              "No records (LATERITE_QUEUE_HISTORY is not set).")
            return
        header = ("job", "name", "queue", "status", "tries", "finished at", "ran", "worker",
                  "error")
        table = [
            (str(r.job_id), r.name, r.queue, r.status, str(r.attempts),
             r.finished_at.strftime("%Y-%m-%d %H:%M:%S"),
             "" if r.ran is None else f"{r.ran:.3f}s", r.worker,
             shorten(r.error.strip().split("\n", 1)[0], ERROR_WIDTH))
            for r in found
        ]
        widths = [max(len(row[i]) for row in [header, *table]) for i in range(len(header) - 1)]
        for line in [header, *table]:
            cells = [cell.ljust(w) for cell, w in zip(line[:-1], widths, strict=True)]
            self.stdout.write("  ".join([*cells, line[-1]]).rstrip())
