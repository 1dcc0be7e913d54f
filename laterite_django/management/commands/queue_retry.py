"""Put failed jobs back on their queues: `manage.py queue_retry ID ... | --all`."""

from __future__ import annotations

from django.core.management.base import CommandError

from ...stores import get_store
from ..arguments import failed_ids, positive_int
from ..store_check import StoreCommand
from ..wording import count as counted


class Command(StoreCommand):
    help = "Put failed jobs back on their queues, due now, with their attempts afresh."

    def add_arguments(self, parser) -> None:
        parser.add_argument("ids", nargs="*", type=positive_int, metavar="ID",
                            help="Failed job ids, as queue_failed prints them.")
        parser.add_argument("--all", action="store_true", help="Retry every failed job.")

    def handle(self, *args, **options) -> None:
        ids = failed_ids(options)
        store = get_store()
        if ids is not None:
            missing = store.missing_failed(ids)
            if missing:
                raise CommandError(
                    f"No failed job has id {', '.join(map(str, missing))}; nothing retried. "
                    f"See queue_failed for the ids."
                )
        count = store.retry(ids)
        where = "its queue" if count == 1 else "their queues"
        self.stdout.write(f"{counted(count, 'job')} put back on {where}.")
