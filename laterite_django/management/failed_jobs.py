"""The commands that act on failed jobs named by id or `--all`: queue_retry, queue_forget."""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandError

from ..stores import Store, get_store
from .arguments import failed_ids, positive_int
from .store_check import StoreCommand

__all__ = ["FailedJobsCommand"]


class FailedJobsCommand(StoreCommand):
    """Take failed job ids or `--all`, refuse an id the failed list does not hold, then
    `act`: every id is checked before any job is touched."""

    # The help of --all: what it does to every failed job.
    all_help: str
    # What follows the missing ids in the error, saying nothing was done.
    nothing_done: str

    def add_arguments(self, parser) -> None:
        parser.add_argument("ids", nargs="*", type=positive_int, metavar="ID",
                            help="Failed job ids, as queue_failed prints them.")
        parser.add_argument("--all", action="store_true", help=self.all_help)

    def handle(self, *args: Any, **options: Any) -> None:
        ids = failed_ids(options)
        store = get_store()
        if ids is not None:
            missing = store.missing_failed(ids)
            if missing:
                raise CommandError(
                    f"No failed job has id {', '.join(map(str, missing))}; {self.nothing_done}"
                )
        self.act(store, ids, options)

    def act(self, store: Store, ids: list[int] | None, options: dict[str, Any]) -> None:
        """Do the command's work on these failed jobs (None: all of them)."""
        raise NotImplementedError
