"""The tables of batches (workflows/), for every store: a batch and its counts (`Batch`),
and the ends already counted, each once (`BatchEnd`)."""

from __future__ import annotations

from django.db import models

__all__ = ["Batch", "BatchEnd"]


class Batch(models.Model):
    """A batch of jobs (`laterite_django.batch`) and its counts, for every store.

    `pending` falls by one as each of its jobs ends (succeeded, or failed for good),
    counted once (workflows.counts); the transaction that takes it to 0 pushes `then`
    and `finally_` (on PostgreSQL's batch drain, the next one, which sets
    `finished_at`), the one that counts the first failure pushes `catch`. The
    callbacks are calls (calls.py) as JSON text.
    """

    id = models.BigAutoField(primary_key=True)
    name = models.CharField(max_length=200, blank=True)
    total = models.IntegerField(default=0)
    pending = models.IntegerField(default=0)
    failed = models.IntegerField(default=0)
    allow_failures = models.BooleanField(default=False)
    then_call = models.TextField(blank=True)
    catch_call = models.TextField(blank=True)
    finally_call = models.TextField(blank=True)  # `finally_`
    created_at = models.DateTimeField()
    caught_at = models.DateTimeField(null=True, blank=True)  # when `catch` was pushed
    finished_at = models.DateTimeField(null=True, blank=True)
    cancelled_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "laterite_batch"
        indexes = [
            models.Index(fields=["-created_at"], name="laterite_batch_created"),
            # The batches not finished, for the sweep's look for those counted down to 0
            # whose callbacks a dead worker did not push. On `id`, not `pending`: the
            # counts' updates stay HOT (no index entry per update).
            models.Index(fields=["id"], condition=models.Q(finished_at__isnull=True),
                         name="laterite_batch_open"),
        ]
        verbose_name_plural = "batches"

    def __str__(self) -> str:
        return self.name or f"batch #{self.pk}"

    @property
    def succeeded(self) -> int:
        return self.total - self.pending - self.failed

    @property
    def state(self) -> str:
        """"running", "finished", "failed" (finished with failures) or "cancelled"."""
        if self.cancelled_at is not None:
            return "cancelled"
        if self.finished_at is None:
            return "running"
        return "failed" if self.failed else "finished"


class BatchEnd(models.Model):
    """One job of a batch counted as ended: the row that makes the count happen once
    (a job retried from the failed list, or an end told twice, finds it there).
    A finished batch's rows are deleted with its last count."""

    id = models.BigAutoField(primary_key=True)
    batch_id = models.BigIntegerField()
    position = models.IntegerField()

    class Meta:
        db_table = "laterite_batch_end"
        constraints = [
            models.UniqueConstraint(fields=["batch_id", "position"], name="laterite_batch_end_once")
        ]

    def __str__(self) -> str:
        return f"batch #{self.batch_id}, job {self.position}"
