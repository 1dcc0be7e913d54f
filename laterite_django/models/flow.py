"""The tables of flow control (flow/) on the database store: the paused queues
(`PausedQueue`) and the recent starts a rate limit counts (`FlowStart`)."""

from __future__ import annotations

from django.db import models

__all__ = ["FlowStart", "PausedQueue"]


class PausedQueue(models.Model):
    """A queue the workers do not claim from (`queue_pause`), until resumed."""

    queue = models.CharField(max_length=100, primary_key=True)
    paused_at = models.DateTimeField()

    class Meta:
        db_table = "laterite_paused_queue"

    def __str__(self) -> str:
        return f"{self.queue} (paused)"


class FlowStart(models.Model):
    """When a job of a queue with a `rate` limit was claimed: the limited claim counts
    those of the last period. Rows older than the longest period are pruned."""

    id = models.BigAutoField(primary_key=True)
    queue = models.CharField(max_length=100)
    started_at = models.DateTimeField()

    class Meta:
        db_table = "laterite_flow_start"
        indexes = [models.Index(fields=["queue", "started_at"], name="laterite_flow_start_q")]

    def __str__(self) -> str:
        return f"{self.queue} at {self.started_at}"
