"""The order pages: a form that places an order, and the order's progress."""

from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_http_methods

from .forms import OrderForm
from .models import Order
from .orders import place_order


@require_http_methods(["GET", "POST"])
def orders(request: HttpRequest) -> HttpResponse:
    """GET: the order form and the latest orders. POST: place an order (its jobs are
    pushed in the same transaction), then show it."""
    form = OrderForm(request.POST or None)
    if request.method == "POST":
        if form.is_valid():
            order = place_order(**form.cleaned_data)
            return redirect("order", pk=order.pk, permanent=False)
        status = 400
    else:
        status = 200
    latest = Order.objects.order_by("-pk")[:10]
    return render(request, "shop/orders.html", {"form": form, "orders": latest}, status=status)


def order(request: HttpRequest, pk: int) -> HttpResponse:
    """One order: which of its jobs have done their work yet."""
    return render(request, "shop/order.html", {"order": get_object_or_404(Order, pk=pk)})
