"""The database tables: jobs waiting or running (`Job`) and the failed list (`FailedJob`)."""

from __future__ import annotations

from django.db import models
from django.db.models import Q

__all__ = ["FailedJob", "Job"]


class Job(models.Model):
    """A job waiting for its time, or running under a worker's claim (`token` set)."""

    id = models.BigAutoField(primary_key=True)
    name = models.CharField(max_length=200)
    queue = models.CharField(max_length=100)
    payload = models.TextField(help_text='JSON: {"args": [...], "kwargs": {...}}')
    priority = models.SmallIntegerField(default=0)
    pushed_at = models.DateTimeField()
    available_at = models.DateTimeField(help_text="Due from this moment.")
    attempts = models.PositiveIntegerField(default=0)
    retry_until = models.DateTimeField(null=True, blank=True)
    unique_key = models.CharField(max_length=255, null=True, blank=True)
    token = models.CharField(max_length=32, null=True, blank=True, help_text="Claim token.")
    claimed_at = models.DateTimeField(null=True, blank=True, help_text="Last heartbeat.")
    claimed_by = models.CharField(max_length=200, blank=True, default="")
    last_error = models.TextField(blank=True, default="")

    class Meta:
        db_table = "laterite_job"
        indexes = [
            # The claim: due jobs of one queue, by priority then age.
            models.Index(
                fields=["queue", "-priority", "available_at", "id"],
                condition=Q(token__isnull=True),
                name="laterite_job_due",
            ),
            # Finding claims whose worker stopped beating.
            models.Index(
                fields=["claimed_at"],
                condition=Q(token__isnull=False),
                name="laterite_job_claimed",
            ),
            models.Index(fields=["name"], name="laterite_job_name"),
        ]
        constraints = [
            # At most one *waiting* job per unique key; a running one does not count.
            models.UniqueConstraint(
                fields=["unique_key"],
                condition=Q(token__isnull=True, unique_key__isnull=False),
                name="laterite_job_unique_waiting",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.name} #{self.pk}"


class FailedJob(models.Model):
    """A job that ran out of tries, raised Fail, or could not run at all."""

    id = models.BigAutoField(primary_key=True)
    job_id = models.BigIntegerField(null=True, blank=True, help_text="Its id while queued.")
    name = models.CharField(max_length=200)
    queue = models.CharField(max_length=100)
    payload = models.TextField()
    priority = models.SmallIntegerField(default=0)
    unique_key = models.CharField(max_length=255, null=True, blank=True)
    attempts = models.PositiveIntegerField(default=0)
    pushed_at = models.DateTimeField()
    failed_at = models.DateTimeField(db_index=True)
    error = models.TextField(help_text="Why it failed: the reason or the last traceback.")

    class Meta:
        db_table = "laterite_failed_job"
        indexes = [
            models.Index(fields=["queue", "failed_at"], name="laterite_failed_queue"),
            models.Index(fields=["name", "failed_at"], name="laterite_failed_name"),
        ]

    def __str__(self) -> str:
        return f"{self.name} (failed #{self.pk})"

    @property
    def error_summary(self) -> str:
        """The error's first line: the reason, before any traceback."""
        return self.error.strip().split("\n", 1)[0]
