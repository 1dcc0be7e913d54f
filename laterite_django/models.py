"""The database tables: jobs waiting or running (`Job`) and the failed list (`FailedJob`)."""

from __future__ import annotations

from django.db import models
from django.db.models import Q

__all__ = [
    "Batch", "BatchEnd", "FailedJob", "FlowStart", "Job", "MinuteCount", "OutboxJob",
    "PausedQueue", "ScheduleRecord", "TaskResultRecord",
]


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
    unique_key = models.CharField(max_length=255, null=True, blank=True)  # noqa: DJ001 -- NULL: no key
    token = models.CharField(  # noqa: DJ001 -- NULL: not claimed
        max_length=32, null=True, blank=True, help_text="Claim token."
    )
    claimed_at = models.DateTimeField(null=True, blank=True, help_text="Last heartbeat.")
    claimed_by = models.CharField(max_length=200, blank=True, default="")
    claim_position = models.PositiveSmallIntegerField(
        default=0,
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
    progress = models.TextField(
        blank=True, default="", db_default="",
        help_text="JSON: what the running attempt last said of its progress (cx.progress).",
    )
    # Flow control (flow/): the job's concurrency key and limit, set at push for a job
    # declared with `concurrency`; a cancel asked while it runs.
    concurrency_key = models.CharField(  # noqa: DJ001 -- NULL: no per-key limit
        max_length=255, null=True, blank=True,
        help_text="At most `concurrency_limit` jobs with this key run at once.",
    )
    concurrency_limit = models.PositiveIntegerField(null=True, blank=True)
    cancel_requested_at = models.DateTimeField(
        null=True, blank=True, help_text="A cancel was asked while it ran."
    )

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
            # The limited claim: how many jobs of a concurrency key run now.
            models.Index(
                fields=["concurrency_key"],
                condition=Q(token__isnull=False, concurrency_key__isnull=False),
                name="laterite_job_running_key",
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

    class Meta:
        db_table = "laterite_outbox_job"

    def __str__(self) -> str:
        return f"{self.name} (outbox #{self.pk})"


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


class ScheduleRecord(models.Model):
    """The state of one recurring schedule on the database store (the Redis store keeps
    it in Redis): its cursor, its last job, and whether it is paused.

    A scheduler moves `last_tick` forward and pushes the tick's job in one transaction
    (stores/database_schedules.py), so each tick fires once however many run.
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

    class Meta:
        db_table = "laterite_schedule"
        verbose_name = "schedule"

    def __str__(self) -> str:
        return self.name


class MinuteCount(models.Model):
    """How many jobs of a queue succeeded and failed in one minute, for the admin's
    overview (the database store; the Redis store keeps them in Redis). Workers add
    their counts about once a second; rows older than two hours are removed."""

    id = models.BigAutoField(primary_key=True)
    queue = models.CharField(max_length=100)
    minute = models.DateTimeField(help_text="The minute's start (UTC).")
    succeeded = models.PositiveIntegerField(default=0)
    failed = models.PositiveIntegerField(default=0)

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


class Batch(models.Model):
    """A batch of jobs (`laterite_django.batch`) and its counts, for every store.

    `pending` falls by one as each of its jobs ends (succeeded, or failed for good),
    counted once (workflows.counts); the transaction that takes it to 0 pushes `then`
    and `finally_` (on PostgreSQL's batch drain, the next one, which sets
    `finished_at`), the one that counts the first failure pushes `catch`. The
    callbacks are calls (workflows.calls) as JSON text.
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
