"""Delete failed jobs: `manage.py queue_forget ID ... | --all [--no-input]`."""

from __future__ import annotations

from django.core.management.base import CommandError

from ...stores import get_store
from ..arguments import confirm, failed_ids, positive_int
from ..store_check import StoreCommand
from ..wording import count as counted


class Command(StoreCommand):
    help = "Delete failed jobs for good."

    def add_arguments(self, parser) -> None:
        parser.add_argument("ids", nargs="*", type=positive_int, metavar="ID",
                            help="Failed job ids, as queue_failed prints them.")
        parser.add_argument("--all", action="store_true", help="Forget every failed job.")
        parser.add_argument("--no-input", "--noinput", action="store_false", dest="interactive",
                            help="Do not ask for confirmation.")

    def handle(self, *args, **options) -> None:
        ids = failed_ids(options)
        store = get_store()
        if ids is not None:
            missing = store.missing_failed(ids)
            if missing:
                raise CommandError(
                    f"No failed job has id {', '.join(map(str, missing))}; nothing forgotten."
                )
            what = counted(len(ids), "failed job")
        else:
            total = sum(store.failed_counts().values())
            what = "the 1 failed job" if total == 1 else f"all {total} failed jobs"
        if not confirm(self, f"This deletes {what} for good.", options):
            return
        count = store.forget(ids)
        self.stdout.write(f"{counted(count, 'failed job')} forgotten.")
