"""The per-minute counts of succeeded and failed jobs behind the admin's overview on the
database store (`MinuteCount`)."""

from __future__ import annotations

from django.db import models

__all__ = ["MinuteCount"]


class MinuteCount(models.Model):
    """How many jobs of a queue succeeded and failed in one minute, for the admin's
    overview (the database store; the Redis store keeps them in Redis), and the queue's
    latency sampled once in the minute. Workers add their counts about once a second
    and the latency once a minute; rows older than 25 hours are removed."""

    id = models.BigAutoField(primary_key=True)
    queue = models.CharField(max_length=100)
    minute = models.DateTimeField(help_text="The minute's start (UTC).")
    succeeded = models.PositiveIntegerField(default=0)
    failed = models.PositiveIntegerField(default=0)
    latency = models.FloatField(
        null=True, blank=True,
        help_text="Seconds the queue's oldest due waiting job had waited when a worker "
                  "sampled it in this minute (0: none waited; empty: not sampled).")

    class Meta:
        db_table = "laterite_minute_count"
        verbose_name = "overview"
        verbose_name_plural = "overview"
        constraints = [
            models.UniqueConstraint(fields=["queue", "minute"], name="laterite_minute_queue"),
        ]
        indexes = [models.Index(fields=["minute"], name="laterite_minute_minute")]

    def __str__(self) -> str:
        return f"{self.queue} at {self.minute:%H:%M}"
