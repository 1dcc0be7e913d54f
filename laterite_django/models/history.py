"""The job history (LATERITE_QUEUE_HISTORY): one `JobRecord` per finished job.

A table of its own, never read by the claim. On PostgreSQL it is partitioned by day on
`finished_at` (the migration creates it so; Django models cannot say it): a day past
every queue's keep is dropped whole, which leaves no dead rows behind. Its primary key
there is (id, finished_at), as PostgreSQL asks of a partitioned table; ids stay unique
by their sequence.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from django.db import models

__all__ = ["JobRecord"]


class JobRecord(models.Model):
    """A job that finished: succeeded, failed for good (to the failed list) or cancelled."""

    class Status(models.TextChoices):
        SUCCEEDED = "succeeded"
        FAILED = "failed"
        CANCELLED = "cancelled"

    id = models.BigAutoField(primary_key=True)
    job_id = models.BigIntegerField(help_text="Its id while queued.")
    name = models.CharField(max_length=200)
    queue = models.CharField(max_length=100)
    args = models.JSONField(null=True, blank=True,
                            help_text='As stored: "[encrypted]" where an encrypted one was.')
    kwargs = models.JSONField(null=True, blank=True,
                              help_text='As stored: "[encrypted]" where an encrypted one was.')
    encrypted = models.JSONField(
        null=True, blank=True,
        help_text="The ciphertext of its encrypted arguments ({'key': id, 'ct': ...}).")
    status = models.CharField(max_length=10, choices=Status.choices)
    attempts = models.IntegerField(default=0, help_text="Claims, the last one included.")
    pushed_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(
        null=True, blank=True, help_text="When its last attempt started (its worker's clock).")
    finished_at = models.DateTimeField(help_text="When it ended (its worker's clock).")
    worker = models.CharField(max_length=200, blank=True, default="",
                              help_text="The worker of its last attempt (host:pid).")
    error = models.TextField(blank=True, default="", help_text="Why it failed or was cancelled.")
    attempt_log = models.JSONField(
        null=True, blank=True,
        help_text="Its attempts, oldest first, each {attempt, started, ended (epoch seconds), "
                  "worker, error}: the first 3 and the last 8, its last one included; NULL "
                  "when its last attempt was its only one kept (see attempt_list).")

    class Meta:
        db_table = "laterite_job_record"
        ordering = ["-finished_at", "-id"]
        indexes = [
            models.Index(fields=["finished_at"], name="laterite_record_finished"),
            models.Index(fields=["name", "finished_at"], name="laterite_record_name"),
            models.Index(fields=["queue", "finished_at"], name="laterite_record_queue"),
            models.Index(fields=["job_id"], name="laterite_record_job"),
        ]

    def __str__(self) -> str:
        return f"{self.name} #{self.job_id} ({self.status})"

    @property
    def payload(self) -> str:
        """Its arguments as the job's payload held them (encrypted ones as "[encrypted]",
        their ciphertext under "encrypted"): what the admin's arguments view opens."""
        data = {"args": self.args or [], "kwargs": self.kwargs or {}}
        if self.encrypted is not None:
            data["encrypted"] = self.encrypted
        return json.dumps(data)

    @property
    def attempt_list(self) -> list[dict[str, Any]]:
        """Its attempts, oldest first, each {"attempt", "started", "ended" (aware datetimes
        or None), "worker", "error"}: the log kept, or its one attempt from its columns."""
        log = self.attempt_log
        if not isinstance(log, list) or not log:
            if self.started_at is None and not self.attempts:
                return []  # never started (cancelled while it waited)
            return [{"attempt": self.attempts or 1, "started": self.started_at,
                     "ended": self.finished_at, "worker": self.worker, "error": self.error}]
        return [{"attempt": entry.get("attempt"), "started": _moment(entry.get("started")),
                 "ended": _moment(entry.get("ended")), "worker": entry.get("worker") or "",
                 "error": entry.get("error") or ""}
                for entry in log if isinstance(entry, dict)]

    @property
    def waited(self) -> float | None:
        """Seconds from its push to its last attempt's start, if both are known."""
        if self.pushed_at is None or self.started_at is None:
            return None
        return (self.started_at - self.pushed_at).total_seconds()

    @property
    def ran(self) -> float | None:
        """Seconds its last attempt ran, if its start is known."""
        if self.started_at is None:
            return None
        return (self.finished_at - self.started_at).total_seconds()


def _moment(seconds: Any) -> datetime | None:
    """An attempt's epoch seconds as an aware datetime; None if not known."""
    if isinstance(seconds, int | float) and not isinstance(seconds, bool) and seconds > 0:
        return datetime.fromtimestamp(seconds, UTC)
    return None
