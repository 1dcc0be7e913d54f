"""The recurring schedules: `manage.py queue_schedules [--json]`, `--pause NAME`,
`--resume NAME`, `--run NAME` (push its job now, outside its ticks)."""

from __future__ import annotations

import json
from datetime import datetime

from django.core.management.base import CommandError
from django.utils import timezone

from ...exceptions import LateriteConfigurationError, StoreUnavailable
from ...schedules import actions
from ..store_check import StoreCommand


def _when(moment: datetime | None, zone) -> str:
    if moment is None:
        return "-"
    return moment.astimezone(zone).strftime("%Y-%m-%d %H:%M:%S %Z")


class Command(StoreCommand):
    help = (
        "List the recurring schedules (job, rule, zone, next three ticks, last tick fired, "
        "paused), or pause, resume or run one now."
    )

    def add_arguments(self, parser) -> None:
        group = parser.add_mutually_exclusive_group()
        group.add_argument("--pause", metavar="NAME", help="Pause schedule NAME.")
        group.add_argument("--resume", metavar="NAME",
                           help="Resume schedule NAME (ticks passed while paused do not fire).")
        group.add_argument("--run", metavar="NAME",
                           help="Push schedule NAME's job now, outside its ticks.")
        parser.add_argument("--json", action="store_true", help="Print JSON instead of a table.")

    def handle(self, *args, **options) -> None:
        try:
            self._handle(options)
        except (StoreUnavailable, CommandError):
            raise
        except LateriteConfigurationError as e:
            raise CommandError(str(e)) from e

    def _handle(self, options: dict) -> None:
        as_json = options["json"]
        for verb in ("pause", "resume"):
            name = options[verb]
            if name:
                state = getattr(actions, verb)(name)
                if as_json:
                    self.stdout.write(json.dumps({"name": name, "paused": state.paused}))
                else:
                    self.stdout.write(f"Schedule {name!r} {verb}d.")
                return
        if options["run"]:
            fired = actions.run_now(options["run"])
            if as_json:
                self.stdout.write(json.dumps({"name": options["run"], "id": fired.id}))
            else:
                self.stdout.write(f"Schedule {options['run']!r}: pushed job #{fired.id}.")
            return
        rows = actions.listing()
        if as_json:
            self.stdout.write(json.dumps([row.as_dict() for row in rows], indent=2))
            return
        if not rows:
            self.stdout.write("No schedules (LATERITE_QUEUE_SCHEDULES, @job(schedule=...)).")
            return
        header = ("name", "job", "rule", "zone", "next ticks", "last tick", "last job",
                  "paused")
        table = []
        for row in rows:
            zone = row.schedule.timezone
            table.append((
                row.name, row.schedule.target, row.schedule.rule, str(zone),
                ", ".join(_when(t, zone) for t in row.next_ticks) or "-",
                _when(row.last_fired, zone),
                f"#{row.last_job_id} {row.last_outcome}" if row.last_job_id else "-",
                "yes" if row.paused else "no",
            ))
        widths = [max(len(r[i]) for r in [header, *table]) for i in range(len(header))]
        for line in [header, *table]:
            self.stdout.write("  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True))
                              .rstrip())
        self.stdout.write(f"(now {timezone.now().isoformat(timespec='seconds')})")
