"""The Django admin for the queue: what waits, what runs, what failed, and putting it back;
the batches and cancelling them.

The lists are read-only (a job is pushed by code, not typed in a form); every
action goes through the store, the same code path as the queue_* commands.
Django's admin autodiscovery imports this package, which registers them.
"""

from __future__ import annotations

from django.contrib import admin

from ..models import Batch, FailedJob, Job, JobRecord, MinuteCount, ScheduleRecord, WorkerRecord
from .base import ReadOnlyQueueAdmin
from .batches import BatchAdmin
from .history import JobRecordAdmin
from .lists import FailedJobAdmin, JobAdmin
from .overview import OverviewAdmin
from .schedules import ScheduleAdmin
from .workers import WorkerAdmin

__all__ = [
    "BatchAdmin", "FailedJobAdmin", "JobAdmin", "JobRecordAdmin", "OverviewAdmin",
    "ReadOnlyQueueAdmin", "ScheduleAdmin", "WorkerAdmin",
]

admin.site.register(Job, JobAdmin)
admin.site.register(FailedJob, FailedJobAdmin)
admin.site.register(ScheduleRecord, ScheduleAdmin)
admin.site.register(MinuteCount, OverviewAdmin)
admin.site.register(Batch, BatchAdmin)
admin.site.register(JobRecord, JobRecordAdmin)
admin.site.register(WorkerRecord, WorkerAdmin)
