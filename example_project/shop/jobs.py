"""The shop's background jobs: one succeeds, one retries then succeeds, one fails."""

from laterite_django import Fail, JobContext, Retry, job

from .models import Order, SalesReport


@job("shop.send_receipt", queue="mail", unique_key=lambda order_id: f"receipt:{order_id}")
def send_receipt(order_id: int) -> None:
    """Succeeds at once (a real project would send an e-mail here)."""
    Order.objects.filter(pk=order_id).update(receipt_sent=True)


@job("shop.sync_inventory", tries=5, backoff=[1, 2])
def sync_inventory(order_id: int, cx: JobContext) -> None:
    """The warehouse API is busy on the first attempt: retry, then succeed."""
    if cx.attempt < 2:
        raise Retry("warehouse busy")
    Order.objects.filter(pk=order_id).update(stock_synced=True)


@job("shop.charge_card", tries=3, backoff=0)
def charge_card(order_id: int) -> None:
    """A declined card will never work: straight to the failed list."""
    order = Order.objects.get(pk=order_id)
    if order.card.startswith("0000"):
        raise Fail(f"card declined for order {order_id}")
    Order.objects.filter(pk=order_id).update(paid=True)


@job("shop.sales_report")
def sales_report(cx: JobContext) -> None:
    """Pushed by the `sales-report` schedule (settings.py), once per tick however many
    workers run: counts the orders and the paid ones."""
    SalesReport.objects.create(scheduled_at=cx.scheduled_at, orders=Order.objects.count(),
                               paid=Order.objects.filter(paid=True).count())
