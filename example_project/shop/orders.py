"""Placing an order: save it and push its jobs in one transaction."""

from django.db import transaction

from .jobs import charge_card, send_receipt, sync_inventory
from .models import Order


def place_order(*, email: str, total_cents: int, card: str) -> Order:
    """Save the order and push its three jobs, all or nothing.

    The pushes join the transaction: if anything in it fails, the order and its
    jobs are gone together, so a worker never charges a card for an order that
    was never saved. (With the Redis store the jobs wait in a database outbox
    until the commit, then move to Redis.)
    """
    with transaction.atomic():
        order = Order.objects.create(email=email, total_cents=total_cents, card=card)
        send_receipt.push(order.pk)
        sync_inventory.push(order.pk)
        charge_card.push(order.pk)
    return order
