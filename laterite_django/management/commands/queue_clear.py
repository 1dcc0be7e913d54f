"""Delete waiting and running jobs: `manage.py queue_clear [--queue Q] [--no-input]`."""

from __future__ import annotations

from django.core.management.base import CommandError

from ...stores import get_store
from ..arguments import confirm
from ..store_check import StoreCommand
from ..wording import count as counted


class Command(StoreCommand):
    help = "Delete every waiting and running job, of one queue or of all. Failed jobs stay."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--queue", help="Only this queue (default: every queue).")
        parser.add_argument("--no-input", "--noinput", action="store_false", dest="interactive",
                            help="Do not ask for confirmation.")

    def handle(self, *args, **options) -> None:
        queue = options["queue"]
        if queue == "":
            # Not "every queue" (leave --queue out for that): no queue has this name.
            raise CommandError("--queue '' names no queue; leave --queue out to clear every "
                               "queue.")
        store = get_store()
        counts = store.counts()
        waiting = sum(
            c.total for name, c in counts.items() if queue is None or name == queue
        )
        where = "every queue" if queue is None else f"queue {queue!r}"
        if not confirm(self, f"This deletes {counted(waiting, 'job')} from {where}.", options):
            return
        count = store.clear(queue)
        self.stdout.write(f"{counted(count, 'job')} deleted from {where}.")
