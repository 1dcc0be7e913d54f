"""The shop's own tests: how a project tests the views that push jobs, and the jobs.

They run on whichever store EXAMPLE_STORE chooses (`python manage.py test`).
TransactionTestCase commits for real, as production does: a push inside
`transaction.atomic()` reaches the queue at the commit (with the Redis store
it moves from the database outbox to Redis then), and the worker sees it.
"""

import time
from io import StringIO

from django.core.management import call_command
from django.db import transaction
from django.test import TransactionTestCase, override_settings
from django.urls import reverse

from laterite_django.models import FailedJob
from laterite_django.stores import get_store

from shop.jobs import send_receipt
from shop.models import Order
from shop.orders import place_order

GOOD_CARD = "4242424242424242"
DECLINED_CARD = "0000000000000000"


def queued() -> dict[str, tuple[int, int, int]]:
    """Each queue's (waiting, delayed, running) jobs, as the store counts them."""
    return {queue: (c.waiting, c.delayed, c.running)
            for queue, c in get_store().counts().items() if c.total}


def work_until_done(deadline_seconds: float = 60) -> None:
    """Run a real worker in this process until no job waits or is delayed.

    One job retries after a one-second backoff, so the worker runs again once
    it is due.
    """
    deadline = time.monotonic() + deadline_seconds
    while queued():
        if time.monotonic() > deadline:
            raise AssertionError(f"Jobs still queued after {deadline_seconds} s: {queued()}")
        call_command("queue_work", "--stop-when-empty", "--processes", "1", "--queue", "default",
                     "--queue", "mail", stdout=StringIO(), stderr=StringIO())
        time.sleep(0.2)


class ShopTestCase(TransactionTestCase):
    def setUp(self) -> None:
        # The database is emptied after each test; with the Redis store, so is Redis.
        call_command("queue_clear", interactive=False, stdout=StringIO())


class OrderPageTests(ShopTestCase):
    def test_the_order_form(self) -> None:
        response = self.client.get(reverse("orders"))
        self.assertContains(response, 'name="card"')

    def test_placing_an_order_pushes_its_jobs(self) -> None:
        response = self.client.post(reverse("orders"), {
            "email": "ada@example.com", "total_cents": 1999, "card": "4242 4242 4242 4242"})
        order = Order.objects.get()
        self.assertRedirects(response, reverse("order", args=[order.pk]))
        self.assertEqual(order.card, GOOD_CARD)
        # Nothing ran yet: the receipt waits on "mail", the stock sync and charge on "default".
        self.assertEqual(queued(), {"default": (2, 0, 0), "mail": (1, 0, 0)})
        self.assertContains(self.client.get(response["Location"]), "Paid: no")

    def test_a_bad_order_is_refused_and_pushes_nothing(self) -> None:
        response = self.client.post(reverse("orders"), {
            "email": "not-an-address", "total_cents": 1999, "card": "12ab"})
        self.assertEqual(response.status_code, 400)
        self.assertContains(response, "Enter a valid email address.", status_code=400)
        self.assertContains(response, "&#x27;12ab&#x27; is not a card number", status_code=400)
        self.assertFalse(Order.objects.exists())
        self.assertEqual(queued(), {})


class TransactionTests(ShopTestCase):
    def test_jobs_pushed_in_a_rolled_back_transaction_are_gone(self) -> None:
        with self.assertRaises(RuntimeError), transaction.atomic():
            place_order(email="ada@example.com", total_cents=1999, card=GOOD_CARD)
            raise RuntimeError("something after the order failed")
        self.assertFalse(Order.objects.exists())
        self.assertEqual(queued(), {})

    def test_a_second_receipt_for_a_waiting_one_is_dropped(self) -> None:
        order = place_order(email="ada@example.com", total_cents=1999, card=GOOD_CARD)
        self.assertEqual(send_receipt.push(order.pk).status, "duplicate")
        self.assertEqual(queued()["mail"], (1, 0, 0))


class WorkerTests(ShopTestCase):
    def test_the_worker_sends_syncs_and_charges(self) -> None:
        good = place_order(email="ada@example.com", total_cents=1999, card=GOOD_CARD)
        declined = place_order(email="bob@example.com", total_cents=500, card=DECLINED_CARD)
        work_until_done()
        good.refresh_from_db()
        declined.refresh_from_db()
        self.assertEqual((good.receipt_sent, good.stock_synced, good.paid), (True, True, True))
        self.assertEqual((declined.receipt_sent, declined.stock_synced, declined.paid),
                         (True, True, False))
        # The declined card is on the failed list, with the reason.
        failed = FailedJob.objects.get()
        self.assertEqual((failed.name, failed.error),
                         ("shop.charge_card", f"Fail: card declined for order {declined.pk}"))
        self.assertEqual(queued(), {})

    @override_settings(LATERITE_QUEUE_MODE="inline")
    def test_inline_mode_runs_a_job_at_the_push(self) -> None:
        order = Order.objects.create(email="ada@example.com", total_cents=1999, card=GOOD_CARD)
        self.assertEqual(send_receipt.push(order.pk).status, "ran")
        order.refresh_from_db()
        self.assertTrue(order.receipt_sent)
        self.assertEqual(queued(), {})


class DemoTests(ShopTestCase):
    def test_the_demo_command(self) -> None:
        out = StringIO()
        call_command("demo", stdout=out)
        self.assertIn("receipt_sent=True stock_synced=True paid=True", out.getvalue())
        self.assertIn("Fail: card declined for order", out.getvalue())
