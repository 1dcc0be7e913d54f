"""The tables of the jobs themselves: waiting or running (`Job`), failed (`FailedJob`),
and pushed to the Redis store inside a transaction, not moved there yet (`OutboxJob`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.core.validators import MinValueValidator
from django.db import models
from django.db.models import Q

if TYPE_CHECKING:
    from django.db.backends.base.base import BaseDatabaseWrapper

__all__ = ["FailedJob", "Job", "OutboxJob", "UncheckedJSONField"]


class UncheckedJSONField(models.JSONField):
    """A JSONField without the CHECK (JSON_VALID(...)) Django gives it on SQLite: the
    job table checks nothing at insert or update (its writers write valid JSON)."""

    def db_check(self, connection: BaseDatabaseWrapper) -> str | None:
        return None


# The job table's counters are plain integers with a validator, not Positive*Fields:
# those add a CHECK constraint, which PostgreSQL compiles again at every INSERT (four of
# them cost a lone push about 4% of its rate). Only laterite writes these columns.
NOT_NEGATIVE = [MinValueValidator(0)]


class Job(models.Model):
    """A job waiting for its time, or running under a worker's claim (`token` set)."""

    id = models.BigAutoField(primary_key=True)
    name = models.CharField(max_length=200)
    queue = models.CharField(max_length=100)
    payload = models.TextField(help_text='JSON: {"args": [...], "kwargs": {...}}')
    priority = models.SmallIntegerField(default=0)
    pushed_at = models.DateTimeField()
    available_at = models.DateTimeField(help_text="Due from this moment.")
    attempts = models.IntegerField(
        default=0, validators=NOT_NEGATIVE, help_text="Claims so far, this one included."
    )
    uncounted = models.IntegerField(
        default=0,
        validators=NOT_NEGATIVE,
        db_default=0,
        help_text="Claims not charged a try: given back unfinished, or lost behind "
                  "the head of their batch (they may never have started).",
    )
    retry_until = models.DateTimeField(null=True, blank=True)
    unique_key = models.CharField(max_length=255, null=True, blank=True)  # noqa: DJ001 -- NULL: no key
    token = models.CharField(  # noqa: DJ001 -- NULL: not claimed
        max_length=32, null=True, blank=True, help_text="Claim token."
    )
    claimed_at = models.DateTimeField(null=True, blank=True, help_text="Last heartbeat.")
    claimed_by = models.CharField(max_length=200, blank=True, default="")
    claim_position = models.SmallIntegerField(
        default=0,
        validators=NOT_NEGATIVE,
        db_default=0,
        help_text="Its place in the batch it was claimed with (0: started at once).",
    )
    last_error = models.TextField(blank=True, default="")
    retried_from_id = models.BigIntegerField(
        null=True, blank=True,
        help_text="The failed job it was retried from (that row left the failed list then).",
    )
    retried_from_error = models.TextField(
        blank=True, default="", db_default="", help_text="That failed job's error, first line."
    )
    attempt_log = UncheckedJSONField(
        null=True, blank=True,
        help_text="Its attempts that failed and were retried, while its queue keeps history "
                  "(LATERITE_QUEUE_HISTORY): the first 3 and the last 7, each {attempt, "
                  "started, ended, worker, error}; NULL while none is kept.",
    )
    progress = models.TextField(
        blank=True, default="", db_default="",
        help_text="JSON: what the running attempt last said of its progress (cx.progress).",
    )
    checkpoint = models.TextField(
        blank=True, default="", db_default="",
        help_text="JSON: what the job saved to pick up where it stopped: the cursors of "
                  "cx.iterate, the results of cx.step blocks that ran, its snoozes.",
    )
    # Flow control (flow/): the job's concurrency key and limit, set at push for a job
    # declared with `concurrency`; a cancel asked while it runs.
    concurrency_key = models.CharField(  # noqa: DJ001 -- NULL: no per-key limit
        max_length=255, null=True, blank=True,
        help_text="At most `concurrency_limit` jobs with this key run at once.",
    )
    concurrency_limit = models.IntegerField(null=True, blank=True, validators=NOT_NEGATIVE)
    cancel_requested_at = models.DateTimeField(
        null=True, blank=True, help_text="A cancel was asked while it ran."
    )
    debounce_until = models.DateTimeField(
        null=True, blank=True,
        help_text="A debounced job: the latest a later push with its key may make it due "
                  "(its first push plus debounce_max).",
    )
    # Fair claims (core/fairness.py): the key a job of a fair queue takes its turns under
    # ("" for the jobs pushed without one, which share a turn), read for the waiting
    # jobs per key (Store.fair_waiting) and the turns no waiting job needs any more.
    fair_key = models.CharField(  # noqa: DJ001 -- NULL: not a job of a fair queue
        max_length=255, null=True, blank=True,
        help_text="A job of a fair queue: the key it takes its turns under.",
    )

    class Meta:
        db_table = "laterite_job"
        # Reading a job's encrypted arguments decrypted, in the admin (see encryption).
        permissions = [("view_job_arguments", "Can view the decrypted arguments of jobs")]
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
            # No index on `name`: every push and every claim would write to it (a claim
            # sets `token`, so its new row version goes into every index), for the
            # admin's name filter alone, which offers the registered names instead.
            # The limited claim: how many jobs of a concurrency key run now.
            models.Index(
                fields=["concurrency_key"],
                condition=Q(token__isnull=False, concurrency_key__isnull=False),
                name="laterite_job_running_key",
            ),
            # The waiting jobs per fair key of a queue (the admin, queue_status, the
            # turns' pruning). Partial: a job without a fair key and a claimed job have
            # no entry, so no other push or claim writes to it.
            models.Index(
                fields=["queue", "fair_key"],
                condition=Q(token__isnull=True, fair_key__isnull=False),
                name="laterite_job_fair_waiting",
            ),
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
    unique_key = models.CharField(max_length=255, null=True, blank=True)  # noqa: DJ001 -- NULL: no key
    attempts = models.PositiveIntegerField(default=0)
    pushed_at = models.DateTimeField()
    failed_at = models.DateTimeField(db_index=True)
    error = models.TextField(help_text="Why it failed: the reason or the last traceback.")
    claim_token = models.CharField(  # NULL: written by the database store (unique allows many)
        max_length=64, null=True, blank=True, unique=True,
        help_text="The claim it failed under (id:token), so a repeated fail() writes one row.",
    )
    retried_from_id = models.BigIntegerField(
        null=True, blank=True,
        help_text="The failed job it was retried from, if this failure is a retry's.",
    )
    retried_from_error = models.TextField(
        blank=True, default="", db_default="", help_text="That failed job's error, first line."
    )

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


class OutboxJob(models.Model):
    """A job pushed to the Redis store inside a database transaction, held here until
    it reaches Redis: it commits with the caller's data, then moves to Redis on commit
    or, if Redis was away, at the workers' next sweep. Text columns have no length
    limit, so a row never fails to write."""

    id = models.BigAutoField(primary_key=True)
    name = models.TextField()
    queue = models.TextField()
    payload = models.TextField()
    priority = models.IntegerField(default=0)
    pushed_at = models.DateTimeField()
    available_at = models.DateTimeField()
    retry_until = models.DateTimeField(null=True, blank=True)
    unique_key = models.TextField(null=True, blank=True)  # noqa: DJ001 -- NULL: no key
    delay = models.FloatField(
        null=True, blank=True,
        help_text="Seconds after its move to Redis at which the job is due, by Redis's "
                  "clock (NULL: due at available_at, a moment given by its pusher).",
    )
    debounce = models.FloatField(
        null=True, blank=True,
        help_text="A debounced push: it replaces the waiting job holding its unique_key, "
                  "due this many seconds after its move (NULL: a plain push).",
    )
    debounce_max = models.FloatField(
        null=True, blank=True,
        help_text="A debounced push: the longest its job may wait after the push that "
                  "stored it, in seconds (NULL: no such deadline).",
    )
    fair_key = models.TextField(  # noqa: DJ001 -- NULL: no key
        null=True, blank=True,
        help_text="A job of a fair queue: the key its queue serves it under, in turn.")
    fair_cost = models.BigIntegerField(
        null=True, blank=True,
        help_text="A job of a fair queue: the virtual time one job of its key takes "
                  "(NULL: a queue not served fairly).")

    class Meta:
        db_table = "laterite_outbox_job"

    def __str__(self) -> str:
        return f"{self.name} (outbox #{self.pk})"
