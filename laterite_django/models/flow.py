"""The tables of flow control (flow/) on the database store: the paused queues
(`PausedQueue`), the recent starts a rate limit counts (`FlowStart`), and the turns of
fair queues' keys (`FairQueue`, `FairTurn`)."""

from __future__ import annotations

from django.db import models

__all__ = ["FairQueue", "FairTurn", "FlowStart", "PausedQueue"]


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


class FairQueue(models.Model):
    """A fair queue's virtual time at one priority (core/fairness.py), kept by the
    database stores' push: `virtual_time`, the place in line a key arriving now starts
    at (never going back), and `last_end`, the end of the last job given a place, where
    the line starts again once nothing waits. Both microseconds of the due-time scale.
    Its row is locked by each push into the queue at that priority, so two pushes give
    no two jobs the same turn."""

    id = models.BigAutoField(primary_key=True)
    queue = models.CharField(max_length=100)
    priority = models.IntegerField()
    virtual_time = models.BigIntegerField(default=0)
    last_end = models.BigIntegerField(default=0)

    class Meta:
        db_table = "laterite_fair_queue"
        constraints = [models.UniqueConstraint(fields=["queue", "priority"],
                                               name="laterite_fair_queue_priority")]

    def __str__(self) -> str:
        return f"{self.queue} (fair, priority {self.priority})"


class FairTurn(models.Model):
    """Where a key's turn in a fair queue ends (its last job's place in line plus the
    virtual time one job of it takes): its next job's place is no earlier. The jobs
    without a key share the key ''."""

    id = models.BigAutoField(primary_key=True)
    queue = models.CharField(max_length=100)
    key = models.TextField()
    ends = models.BigIntegerField()

    class Meta:
        db_table = "laterite_fair_turn"
        constraints = [models.UniqueConstraint(fields=["queue", "key"],
                                               name="laterite_fair_turn_key")]

    def __str__(self) -> str:
        return f"{self.queue} {self.key!r} until {self.ends}"
