"""The results of the tasks pushed through Django's Tasks framework (`TaskResultRecord`)."""

from __future__ import annotations

from django.db import models

__all__ = ["TaskResultRecord"]


class TaskResultRecord(models.Model):
    """The result of a task pushed through Django's Tasks framework (`LateriteBackend`).

    One row per `Task.enqueue()`; the worker updates it at each attempt. Kept
    until `expires_at` (set when the task finishes), then `queue_prune_results`
    deletes it.
    """

    class Status(models.TextChoices):
        READY = "READY", "Ready"
        RUNNING = "RUNNING", "Running"
        FAILED = "FAILED", "Failed"
        SUCCESSFUL = "SUCCESSFUL", "Successful"

    id = models.CharField(max_length=64, primary_key=True)
    task_path = models.CharField(max_length=255, help_text="The task's module path.")
    backend = models.CharField(max_length=100, help_text="Its TASKS alias.")
    queue = models.CharField(max_length=100)
    priority = models.SmallIntegerField(default=0)
    run_after = models.DateTimeField(null=True, blank=True)
    args = models.JSONField(default=list)
    kwargs = models.JSONField(default=dict)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.READY)
    enqueued_at = models.DateTimeField()
    started_at = models.DateTimeField(null=True, blank=True)
    last_attempted_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    errors = models.JSONField(
        default=list, help_text='One {"exception_class_path", "traceback"} per failed attempt.'
    )
    worker_ids = models.JSONField(default=list, help_text="The worker of each attempt.")
    return_value = models.JSONField(null=True, blank=True)
    job_id = models.CharField(max_length=64, blank=True, default="", help_text="Its job's id.")
    unique_key = models.CharField(max_length=255, blank=True, default="")
    expires_at = models.DateTimeField(
        null=True, blank=True, help_text="Pruned after this moment; none while unfinished."
    )

    class Meta:
        db_table = "laterite_task_result"
        indexes = [
            models.Index(fields=["expires_at"], name="laterite_task_result_expiry"),
            models.Index(fields=["unique_key", "status"], name="laterite_task_result_key"),
        ]

    def __str__(self) -> str:
        return f"{self.task_path} ({self.status}, {self.pk})"
