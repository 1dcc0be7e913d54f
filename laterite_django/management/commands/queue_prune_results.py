"""Delete expired task results: `manage.py queue_prune_results [--older-than SECONDS]`.

A finished result expires RESULT_TTL seconds after it finished (the backend's
OPTIONS); run this from cron. Unfinished results are never pruned.
"""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from ...conf import settings
from ...models import TaskResultRecord
from ..arguments import confirm, non_negative_float
from ..store_check import StoreCommand
from ..wording import count as counted


class Command(StoreCommand):
    help = (
        "Delete the results of Django tasks that expired (RESULT_TTL after they finished), "
        "or with --older-than, every finished result older than that."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument(
            "--older-than", type=non_negative_float, metavar="SECONDS",
            help="Delete finished results that finished more than SECONDS ago, expired or "
            "not (asks first unless --no-input).",
        )
        parser.add_argument("--backend", metavar="ALIAS",
                            help="Only results of this TASKS alias.")
        parser.add_argument("--dry-run", action="store_true",
                            help="Say how many would go; delete nothing.")
        parser.add_argument("--no-input", "--noinput", action="store_false", dest="interactive",
                            help="Do not ask for confirmation.")

    def handle(self, *args, **options) -> None:
        now = timezone.now()
        rows = TaskResultRecord.objects.using(settings.DATABASE)
        if options["backend"]:
            rows = rows.filter(backend=options["backend"])
        older_than = options["older_than"]
        if older_than is None:
            rows = rows.filter(expires_at__lte=now)
            what = "expired"
        else:
            rows = rows.filter(
                status__in=[TaskResultRecord.Status.SUCCESSFUL, TaskResultRecord.Status.FAILED],
                finished_at__lte=now - timedelta(seconds=older_than),
            )
            what = f"finished more than {older_than:g} s ago"
        if options["dry_run"]:
            count = rows.count()
            self.stdout.write(f"{counted(count, 'task result')} {what} would be deleted.")
            return
        if older_than is not None and not confirm(
            self, f"Delete every task result {what}?", options
        ):
            return
        count, _ = rows.delete()
        self.stdout.write(f"{counted(count, 'task result')} {what} deleted.")
