"""How a view pushes jobs: inside the transaction that saves the order."""

from django.db import transaction
from django.http import HttpRequest, JsonResponse

from .jobs import charge_card, send_receipt, sync_inventory
from .models import Order


def place_order(request: HttpRequest) -> JsonResponse:
    with transaction.atomic():
        order = Order.objects.create(
            email=request.POST["email"], total_cents=int(request.POST["total_cents"]),
            card=request.POST["card"],
        )
        # Stored in the same transaction: if saving the order fails, no job is left behind.
        send_receipt.push(order.pk)
        sync_inventory.push(order.pk)
        charge_card.push(order.pk)
    return JsonResponse({"order": order.pk})
