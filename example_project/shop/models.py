from django.db import models


class Order(models.Model):
    """An order whose receipt, stock sync and payment happen in background jobs."""

    email = models.EmailField()
    total_cents = models.PositiveIntegerField()
    card = models.CharField(max_length=20)
    receipt_sent = models.BooleanField(default=False)
    stock_synced = models.BooleanField(default=False)
    paid = models.BooleanField(default=False)

    def __str__(self) -> str:
        return f"Order {self.pk} for {self.email}"


class SalesReport(models.Model):
    """Written by the `sales-report` schedule (settings.py) at each of its ticks."""

    scheduled_at = models.DateTimeField()
    orders = models.PositiveIntegerField()
    paid = models.PositiveIntegerField()

    def __str__(self) -> str:
        return f"Report for {self.scheduled_at:%H:%M:%S}: {self.orders} orders, {self.paid} paid"
