"""List the live workers: `manage.py queue_workers [--json]`.

One line per worker process (every `queue_work` process, every web server process
running the `worker` mode's threads): host, pid, version, queues, concurrency, when
it started, its last heartbeat, the jobs in its hand, and whether it is alive or
lost (no beat for longer than LATERITE_QUEUE_RETRY_AFTER). A lost worker is
listed for an hour after its last beat, then removed.
"""

from __future__ import annotations

import json

from django.core.management.base import CommandError

from ...conf import settings
from ...core.workers import WorkerInfo
from ...exceptions import StoreUnavailable
from ...stores import get_store
from ..store_check import StoreCommand
from ..wording import count

# The most job ids a line shows; --json lists them all.
JOBS_SHOWN = 5


class Command(StoreCommand):
    help = ("List the worker processes that run or ran lately: host, pid, version, queues, "
            "concurrency, started, last heartbeat, jobs in hand, alive or lost.")

    def add_arguments(self, parser) -> None:
        parser.add_argument("--json", action="store_true", help="Print JSON instead of a table.")

    def handle(self, *args, **options) -> None:
        retry_after = float(settings.RETRY_AFTER)
        try:
            found = get_store().workers()
        except StoreUnavailable:
            raise  # one line, by StoreCommand
        except Exception as e:
            raise CommandError(f"The queue store cannot be read: {e}") from e
        if options["json"]:
            self.stdout.write(json.dumps(
                {"retry_after": retry_after,
                 "workers": [w.as_dict(retry_after) for w in found]}, indent=2))
            return
        if not found:
            self.stdout.write("No worker is running.")
            return
        header = ("host", "pid", "version", "queues", "conc", "started", "last beat",
                  "jobs", "state")
        rows = [_row(w, retry_after) for w in found]
        widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
        for row in [header, *rows]:
            self.stdout.write(
                "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())
        lost = sum(w.lost(retry_after) for w in found)
        self.stdout.write(f"{count(len(found) - lost, 'worker')} alive, {lost} lost "
                          f"(no heartbeat for over {retry_after:g} s)")


def _row(worker: WorkerInfo, retry_after: float) -> tuple[str, ...]:
    jobs = " ".join(f"#{i}" for i in worker.jobs[:JOBS_SHOWN])
    if len(worker.jobs) > JOBS_SHOWN:
        jobs += f" +{len(worker.jobs) - JOBS_SHOWN}"
    return (worker.host, str(worker.pid), worker.version, ",".join(worker.queues),
            str(worker.concurrency), worker.started_at.strftime("%Y-%m-%d %H:%M:%S"),
            f"{ago(worker.age)} ago", jobs or "-",
            "lost" if worker.lost(retry_after) else "alive")


def ago(seconds: float) -> str:
    """`4 s`, `3 min`, `2 h`: how long ago, said shortly."""
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds // 60:.0f} min"
    return f"{seconds // 3600:.0f} h"
