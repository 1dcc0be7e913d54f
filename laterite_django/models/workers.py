"""The live workers' list on the database stores (`WorkerRecord`)."""

from __future__ import annotations

from django.db import models

from ..core.workers import ID_MAX

__all__ = ["WorkerRecord"]


class WorkerRecord(models.Model):
    """One running worker process, written by its heartbeat and removed as it stops
    (see core.workers); the Redis store keeps the same entries in Redis. A row whose
    `beat_at` is older than RETRY_AFTER is a lost worker's; it is removed an hour
    after its last beat."""

    id = models.CharField(primary_key=True, max_length=ID_MAX,
                          help_text="<host>:<pid> of the worker process.")
    name = models.CharField(max_length=ID_MAX, help_text="Shown as its jobs' claimed_by.")
    host = models.CharField(max_length=ID_MAX)
    pid = models.PositiveIntegerField()
    version = models.CharField(max_length=50, help_text="laterite_django's version.")
    queues = models.JSONField(default=list)
    concurrency = models.PositiveIntegerField(default=1,
                                              help_text="Jobs it may run at once.")
    started_at = models.DateTimeField()
    beat_at = models.DateTimeField(help_text="Its last heartbeat (the database's clock).")
    jobs = models.JSONField(default=list, help_text="Ids of the jobs in its hand.")

    class Meta:
        db_table = "laterite_worker"
        verbose_name = "worker"
        verbose_name_plural = "workers"
        indexes = [models.Index(fields=["beat_at"], name="laterite_worker_beat_at")]

    def __str__(self) -> str:
        return self.id
