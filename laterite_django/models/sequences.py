"""Ordered sequences on the database stores (`@job(sequence=...)`, core/sequences.py):
each key's head and the jobs held behind it, in push order."""

from __future__ import annotations

from django.db import models

__all__ = ["SequenceHead", "SequenceHeld"]


class SequenceHead(models.Model):
    """A sequence with a job in it: the one job of its key that may be claimed (its head),
    and whether that job failed for good and holds the rest (`failed`). A push and the
    head's settle lock this row, so a key's jobs are let go one at a time, in order."""

    id = models.BigAutoField(primary_key=True)
    key = models.CharField(max_length=255, unique=True)
    head_id = models.BigIntegerField(
        null=True, blank=True,
        help_text="The head's job id (NULL: none: the next push is the head).")
    failed = models.BooleanField(
        default=False, db_default=False,
        help_text="The head failed for good: its key's other jobs wait until it is "
                  "retried or forgotten, or the sequence is released.")

    class Meta:
        db_table = "laterite_sequence"
        indexes = [
            # The held sequences (the admin, queue_status).
            models.Index(fields=["key"], condition=models.Q(failed=True),
                         name="laterite_sequence_failed"),
        ]

    def __str__(self) -> str:
        return f"sequence {self.key}"


class SequenceHeld(models.Model):
    """A job held behind its sequence's head: never due (core/sequences.HELD_AT) until
    the head settles and it is promoted, due at `due` (or at once)."""

    job_id = models.BigIntegerField(primary_key=True)
    key = models.CharField(max_length=255)
    due = models.DateTimeField(help_text="When it was to be due, had it not been held.")

    class Meta:
        db_table = "laterite_sequence_held"
        indexes = [models.Index(fields=["key", "job_id"], name="laterite_sequence_next")]

    def __str__(self) -> str:
        return f"held job #{self.job_id} of {self.key}"
