"""Pause queues: `manage.py queue_pause QUEUE ...` (workers stop claiming their jobs)."""

from __future__ import annotations

from ...conf import settings
from ...stores import get_store
from ..store_check import StoreCommand


class Command(StoreCommand):
    help = (
        "Pause queues: no worker claims their jobs once LATERITE_QUEUE_POLL seconds have "
        "passed; pushes are still accepted and running jobs finish. Undo with queue_resume."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("queues", nargs="+", metavar="QUEUE", help="Queue names.")

    def handle(self, *args, **options) -> None:
        queues = list(dict.fromkeys(options["queues"]))
        get_store().pause(queues)
        self.stdout.write(
            f"Paused: {', '.join(queues)}. Workers stop claiming from "
            f"{'it' if len(queues) == 1 else 'them'} within {settings.POLL:g} s.")
