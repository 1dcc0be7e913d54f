"""The shop's own tests: how a project tests the views that push jobs, and the jobs.

They run on whichever store EXAMPLE_STORE chooses (`python manage.py test`), with
laterite's test helpers: `capture_jobs()` to see what a view pushed without
running anything, `run_jobs()` to run what is due here, by the worker's rules,
inside a plain `TestCase`, and `isolated_redis_prefix()` so that with the Redis
store each test has keys of its own.
"""

from io import StringIO

from django.core.management import call_command
from django.db import transaction
from django.test import TestCase, TransactionTestCase, override_settings
from django.urls import reverse

from laterite_django import Fail
from laterite_django.models import FailedJob
from laterite_django.testing import capture_jobs, isolated_redis_prefix, run_jobs

from shop.jobs import charge_card, send_receipt
from shop.models import Order
from shop.orders import place_order

GOOD_CARD = "4242424242424242"
DECLINED_CARD = "0000000000000000"


class ShopTestCase(TestCase):
    def setUp(self) -> None:
        self.enterContext(isolated_redis_prefix())


class OrderPageTests(ShopTestCase):
    def test_the_order_form(self) -> None:
        response = self.client.get(reverse("orders"))
        self.assertContains(response, 'name="card"')

    def test_placing_an_order_pushes_its_jobs(self) -> None:
        with capture_jobs() as pushed:
            response = self.client.post(reverse("orders"), {
                "email": "ada@example.com", "total_cents": 1999, "card": "4242 4242 4242 4242"})
        order = Order.objects.get()
        self.assertRedirects(response, reverse("order", args=[order.pk]))
        self.assertEqual(order.card, GOOD_CARD)
        self.assertEqual(
            [(p.name, p.args, p.queue) for p in pushed],
            [("shop.send_receipt", (order.pk,), "mail"),
             ("shop.sync_inventory", (order.pk,), "default"),
             ("shop.charge_card", (order.pk,), "default")])
        self.assertContains(self.client.get(response["Location"]), "Paid: no")

    def test_a_bad_order_is_refused_and_pushes_nothing(self) -> None:
        with capture_jobs() as pushed:
            response = self.client.post(reverse("orders"), {
                "email": "not-an-address", "total_cents": 1999, "card": "12ab"})
        self.assertContains(response, "Enter a valid email address.", status_code=400)
        self.assertContains(response, "&#x27;12ab&#x27; is not a card number", status_code=400)
        self.assertFalse(Order.objects.exists())
        self.assertEqual(pushed, [])


class TransactionTests(ShopTestCase):
    def test_jobs_pushed_in_a_rolled_back_transaction_are_gone(self) -> None:
        with self.assertRaises(RuntimeError), transaction.atomic():
            place_order(email="ada@example.com", total_cents=1999, card=GOOD_CARD)
            raise RuntimeError("something after the order failed")
        self.assertFalse(Order.objects.exists())
        self.assertEqual(run_jobs(), 0)  # nothing was left to run

    def test_a_second_receipt_for_a_waiting_one_is_dropped(self) -> None:
        order = place_order(email="ada@example.com", total_cents=1999, card=GOOD_CARD)
        send_receipt.push(order.pk)  # the same unique_key as the receipt waiting
        self.assertEqual(run_jobs("mail"), 1)


class WorkerTests(ShopTestCase):
    def test_the_jobs_send_sync_and_charge(self) -> None:
        good = place_order(email="ada@example.com", total_cents=1999, card=GOOD_CARD)
        declined = place_order(email="bob@example.com", total_cents=500, card=DECLINED_CARD)
        # Six jobs, and the stock syncs again after their one-second backoff.
        self.assertEqual(run_jobs(wait_delayed=5), 8)
        good.refresh_from_db()
        declined.refresh_from_db()
        self.assertEqual((good.receipt_sent, good.stock_synced, good.paid), (True, True, True))
        self.assertEqual((declined.receipt_sent, declined.stock_synced, declined.paid),
                         (True, True, False))
        # The declined card is on the failed list, with the reason.
        failed = FailedJob.objects.get()
        self.assertEqual((failed.name, failed.error),
                         ("shop.charge_card", f"Fail: card declined for order {declined.pk}"))

    def test_a_declined_card_raises_with_raise_errors(self) -> None:
        order = Order.objects.create(email="bob@example.com", total_cents=500, card=DECLINED_CARD)
        charge_card.push(order.pk)
        # raise_errors=True hands the job's exception to the test, once it is settled.
        with self.assertRaisesMessage(Fail, f"card declined for order {order.pk}"):
            run_jobs(raise_errors=True)
        self.assertEqual(FailedJob.objects.get().name, "shop.charge_card")

    @override_settings(LATERITE_QUEUE_MODE="inline")
    def test_inline_mode_runs_a_job_at_the_push(self) -> None:
        order = Order.objects.create(email="ada@example.com", total_cents=1999, card=GOOD_CARD)
        self.assertEqual(send_receipt.push(order.pk).status, "ran")
        order.refresh_from_db()
        self.assertTrue(order.receipt_sent)


class DemoTests(TransactionTestCase):
    """The demo commits and runs `queue_work` itself: a TransactionTestCase."""

    def test_the_demo_command(self) -> None:
        self.enterContext(isolated_redis_prefix())
        out = StringIO()
        call_command("demo", stdout=out)
        self.assertIn("receipt_sent=True stock_synced=True paid=True", out.getvalue())
        self.assertIn("Fail: card declined for order", out.getvalue())
        self.assertRegex(out.getvalue(), r"Report for \d\d:\d\d:\d\d: 2 orders, 1 paid")
