"""The database tables, one module per concept: the jobs (`Job`, `FailedJob`,
`OutboxJob`), the Tasks framework's results, the schedules, the per-minute counts, flow
control and batches. Re-exported here, where Django and every import look for them."""

from __future__ import annotations

# In the order the models were defined in when they were one module: Django registers
# them in the order they are imported.
# isort: off
from .jobs import FailedJob, Job, OutboxJob
from .task_results import TaskResultRecord
from .schedules import ScheduleRecord
from .minutes import MinuteCount
from .flow import FlowStart, PausedQueue
from .batches import Batch, BatchEnd
from .flow import FairQueue, FairTurn
from .workers import WorkerRecord
from .history import JobRecord
from .sequences import SequenceHead, SequenceHeld
# isort: on

__all__ = [
    "Batch", "BatchEnd", "FailedJob", "FairQueue", "FairTurn", "FlowStart", "Job", "JobRecord",
    "MinuteCount", "OutboxJob", "PausedQueue", "ScheduleRecord", "SequenceHead", "SequenceHeld",
    "TaskResultRecord",
    "WorkerRecord",
]
