"""Delete failed jobs: `manage.py queue_forget ID ... | --all [--no-input]`."""

from __future__ import annotations

from typing import Any

from ...stores import Store
from ..arguments import confirm
from ..failed_jobs import FailedJobsCommand
from ..wording import count as counted


class Command(FailedJobsCommand):
    help = ("Delete failed jobs for good. A sequence held by one of them (its failed head) "
            "goes on.")
    all_help = "Forget every failed job."
    nothing_done = "nothing forgotten."

    def add_arguments(self, parser) -> None:
        super().add_arguments(parser)
        parser.add_argument("--no-input", "--noinput", action="store_false", dest="interactive",
                            help="Do not ask for confirmation.")

    def act(self, store: Store, ids: list[int] | None, options: dict[str, Any]) -> None:
        if ids is not None:
            what = counted(len(ids), "failed job")
        else:
            total = sum(store.failed_counts().values())
            what = "the 1 failed job" if total == 1 else f"all {total} failed jobs"
        if not confirm(self, f"This deletes {what} for good.", options):
            return
        count = store.forget(ids)
        self.stdout.write(f"{counted(count, 'failed job')} forgotten.")
