"""Resume paused queues: `manage.py queue_resume QUEUE ...`."""

from __future__ import annotations

from ...stores import get_store
from ..store_check import StoreCommand


class Command(StoreCommand):
    help = "Resume paused queues; their waiting jobs are claimed again at once."

    def add_arguments(self, parser) -> None:
        parser.add_argument("queues", nargs="+", metavar="QUEUE", help="Queue names.")

    def handle(self, *args, **options) -> None:
        queues = list(dict.fromkeys(options["queues"]))
        store = get_store()
        was_paused = store.paused_queues()
        store.resume(queues)
        resumed = [q for q in queues if q in was_paused]
        others = [q for q in queues if q not in was_paused]
        if resumed:
            self.stdout.write(f"Resumed: {', '.join(resumed)}.")
        if others:
            self.stdout.write(f"Not paused: {', '.join(others)}.")
