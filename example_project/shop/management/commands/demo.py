"""`manage.py demo`: migrate, place two orders, run the worker until done, show the result."""

from pathlib import Path

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand

import laterite_django

from shop.jobs import send_receipt
from shop.models import Order, SalesReport
from shop.orders import place_order


class Command(BaseCommand):
    help = "Run the example end to end (on SQLite unless EXAMPLE_STORE says otherwise)."

    def handle(self, *args, **options) -> None:
        self.stdout.write(
            f"laterite-django {laterite_django.__version__} from "
            f"{Path(laterite_django.__file__).parent}, EXAMPLE_STORE={settings.STORE}"
        )
        call_command("migrate", verbosity=0)
        call_command("queue_clear", no_input=True, interactive=False, verbosity=0,
                     stdout=self.stdout)
        call_command("queue_forget", all=True, interactive=False, stdout=self.stdout)
        self.stdout.write("\n== Placing two orders (one with a declined card)")
        for email, card in [("ada@example.com", "4242424242424242"),
                            ("bob@example.com", "0000000000000000")]:
            order = place_order(email=email, total_cents=1999, card=card)
            send_receipt.push(order.pk)  # a duplicate of a waiting job, dropped by unique_key
        call_command("queue_status", stdout=self.stdout)

        self.stdout.write("\n== Running the worker until every job is done or failed")
        # --wait-delayed: a retry waiting for its backoff (a few seconds) is waited for.
        call_command("queue_work", "--queue", "default", "--queue", "mail",
                     "--stop-when-empty", "--wait-delayed", "60", "--processes", "1",
                     "--no-scheduler")

        self.stdout.write("\n== Status")
        call_command("queue_status", stdout=self.stdout)
        self.stdout.write("\n== Failed list")
        call_command("queue_failed", stdout=self.stdout)
        self.stdout.write("\n== Orders")
        for order in Order.objects.order_by("pk"):
            self.stdout.write(
                f"{order}: receipt_sent={order.receipt_sent} stock_synced={order.stock_synced} "
                f"paid={order.paid}"
            )

        self.stdout.write("\n== A schedule: sales-report, every 2 seconds (settings.py)")
        SalesReport.objects.all().delete()
        call_command("queue_schedules", stdout=self.stdout)
        self.stdout.write("A worker with its scheduler, for 5 seconds:")
        call_command("queue_work", "--queue", "default", "--max-seconds", "5",
                     "--processes", "1")
        for report in SalesReport.objects.order_by("scheduled_at"):
            self.stdout.write(str(report))
