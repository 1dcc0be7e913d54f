"""Put failed jobs back on their queues: `manage.py queue_retry ID ... | --all`."""

from __future__ import annotations

from typing import Any

from ...stores import Store
from ..failed_jobs import FailedJobsCommand
from ..wording import count as counted


class Command(FailedJobsCommand):
    help = "Put failed jobs back on their queues, due now, with their attempts afresh."
    all_help = "Retry every failed job."
    nothing_done = "nothing retried. See queue_failed for the ids."

    def act(self, store: Store, ids: list[int] | None, options: dict[str, Any]) -> None:
        count = store.retry(ids)
        where = "its queue" if count == 1 else "their queues"
        self.stdout.write(f"{counted(count, 'job')} put back on {where}.")
