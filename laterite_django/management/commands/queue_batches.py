"""The batches: `manage.py queue_batches [--json] [--state S] [--limit N]`, newest first,
and `queue_batches --cancel ID [ID ...] [--no-input]`.

Cancelling removes a batch's jobs that have not started (one claimed meanwhile is
dropped unrun by its worker), lets running ones finish, never pushes `then` or
`catch`, and pushes `finally_` once every job has ended. A cancelled batch shows no
count of jobs succeeded ("-", null in --json): the jobs its cancel removed are counted
as ended, with those that succeeded.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import TYPE_CHECKING

from django.core.management.base import CommandError
from django.utils import timezone

from ...workflows import actions
from ..arguments import confirm, positive_int
from ..store_check import StoreCommand
from ..wording import count, shorten

if TYPE_CHECKING:
    from ...models import Batch

# The batches listed when --limit is not given.
LIMIT = 50
# The table shows this much of a batch's name; --json shows it all.
NAME_WIDTH = 40


def _when(moment: datetime | None) -> str:
    if moment is None:
        return "-"
    return timezone.localtime(moment).strftime("%Y-%m-%d %H:%M:%S")


def _count(value: int | None) -> str:
    return "-" if value is None else str(value)


def _iso(moment: datetime | None) -> str | None:
    return None if moment is None else moment.isoformat()


def _json(row: Batch) -> dict:
    return {
        "id": row.pk, "name": row.name, "state": row.state, "total": row.total,
        "succeeded": actions.succeeded(row), "failed": row.failed, "pending": row.pending,
        "allow_failures": row.allow_failures, "created_at": _iso(row.created_at),
        "caught_at": _iso(row.caught_at), "finished_at": _iso(row.finished_at),
        "cancelled_at": _iso(row.cancelled_at),
        "callbacks": actions.callbacks(row),
    }


def _said(done: actions.CancelOutcome) -> str:
    """One line: what cancelling one batch did, and what is left of it."""
    row = done.row
    who = f"Batch {done.batch_id}" + (f" ({row.name})" if row is not None and row.name else "")
    if done.outcome == actions.UNKNOWN or row is None:
        return f"{who}: no such batch."
    if done.outcome == actions.FINISHED:
        return f"{who}: finished already ({row.state}); nothing changed."
    if done.outcome == actions.WAS_CANCELLED:
        return f"{who}: cancelled already; nothing changed."
    text = f"{who}: cancelled, {count(done.removed, 'waiting job')} removed now"
    if row.pending > 0:
        text += (f"; {count(row.pending, 'job')} not ended yet (running ones finish, the "
                 f"others are dropped by the worker that claims them)")
    return text + "."


class Command(StoreCommand):
    help = (
        "List the batches, newest first (state, total, succeeded, failed, pending, when "
        "created and finished), or cancel some by id."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("--state", choices=list(actions.STATES),
                            help="Only the batches in this state.")
        parser.add_argument("--limit", type=positive_int,
                            help=f"At most this many (default {LIMIT}).")
        parser.add_argument("--cancel", nargs="+", type=positive_int, metavar="ID",
                            help="Cancel these batches: their jobs not started are removed; "
                            "then and catch are never pushed, finally_ is once all ended.")
        parser.add_argument("--no-input", "--noinput", action="store_false", dest="interactive",
                            help="With --cancel: do not ask for confirmation.")
        parser.add_argument("--json", action="store_true", help="Print JSON instead of a table.")

    def handle(self, *args, **options) -> None:
        if options["cancel"]:
            given = [name for name in ("state", "limit") if options[name] is not None]
            if given:
                raise CommandError(f"--cancel takes batch ids only, not --{given[0]}.")
            self._cancel(list(dict.fromkeys(options["cancel"])), options)
            return
        rows = actions.listing(options["state"], options["limit"] or LIMIT)
        if options["json"]:
            self.stdout.write(json.dumps([_json(row) for row in rows], indent=2))
            return
        if not rows:
            state = options["state"]
            self.stdout.write(f"No {state} batches." if state else "No batches.")
            return
        header = ("id", "name", "state", "total", "succeeded", "failed", "pending", "created",
                  "finished")
        table = [
            (str(row.pk), shorten(row.name, NAME_WIDTH) or "-", row.state, str(row.total),
             _count(actions.succeeded(row)), str(row.failed), str(row.pending),
             _when(row.created_at), _when(row.finished_at))
            for row in rows
        ]
        widths = [max(len(r[i]) for r in [header, *table]) for i in range(len(header))]
        for line in [header, *table]:
            self.stdout.write("  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True))
                              .rstrip())

    def _cancel(self, ids: list[int], options: dict) -> None:
        found = {row.pk: row for row in actions.batches().filter(pk__in=ids)}
        running = [found[i] for i in ids if i in found and found[i].state == "running"]
        if running:
            names = ", ".join(f"{row.pk}" + (f" ({row.name})" if row.name else "")
                              for row in running[:10])
            more = f" and {len(running) - 10} more" if len(running) > 10 else ""
            question = (f"This cancels {count(len(running), 'batch', 'batches')} ({names}{more}): "
                        f"their jobs not started are removed, then and catch never pushed.")
            if not confirm(self, question, options):
                return
        outcomes = [actions.cancel(batch_id) for batch_id in ids]
        if options["json"]:
            self.stdout.write(json.dumps([done.as_dict() for done in outcomes], indent=2))
        else:
            for done in outcomes:
                self.stdout.write(_said(done))
        unknown = [str(done.batch_id) for done in outcomes if done.outcome == actions.UNKNOWN]
        if unknown:
            raise CommandError(f"No batch has id {', '.join(unknown)}.")
