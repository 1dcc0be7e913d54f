"""The state of each recurring schedule on the database store (`ScheduleRecord`)."""

from __future__ import annotations

from django.db import models

__all__ = ["ScheduleRecord"]


class ScheduleRecord(models.Model):
    """The state of one recurring schedule on the database store (the Redis store keeps
    it in Redis): its cursor, its last job, and whether it is paused.

    A scheduler moves `last_tick` forward and pushes the tick's job in one transaction
    (stores/database/store.py), so each tick fires once however many run.
    """

    name = models.CharField(max_length=200, primary_key=True)
    last_tick = models.DateTimeField(
        null=True, blank=True, help_text="Ticks at or before this moment are done with."
    )
    fired_at = models.DateTimeField(
        null=True, blank=True, help_text="The tick (or run-now moment) of its last job."
    )
    job_id = models.BigIntegerField(null=True, blank=True, help_text="That job's id.")
    paused = models.BooleanField(default=False, db_default=False)
    rule_hash = models.CharField(
        max_length=16, blank=True, default="", db_default="",
        help_text="The digest of the rule its cursor follows ('removed' once out of the "
                  "settings; empty if not known yet): another one restarts it from then.",
    )

    class Meta:
        db_table = "laterite_schedule"
        verbose_name = "schedule"

    def __str__(self) -> str:
        return self.name
