"""Run jobs: `manage.py queue_work [--queue Q ...] [--stop-when-empty] ...`."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from ...conf import settings
from ...exceptions import StoreUnavailable
from ...worker.loop import Worker, WorkerStopped
from ...worker.shutdown import stop_signals
from ..arguments import non_negative_float, positive_float, positive_int


class Command(BaseCommand):
    help = "Run a worker that claims and runs jobs from the given queues."

    requires_system_checks = "__all__"

    def add_arguments(self, parser) -> None:
        parser.add_argument(
            "--queue", action="append", dest="queues", metavar="QUEUE",
            help="A queue to take from; repeat in priority order (default: "
            "LATERITE_QUEUE_QUEUES).",
        )
        parser.add_argument("--once", action="store_true", help="Run at most one job, then exit.")
        parser.add_argument(
            "--stop-when-empty", action="store_true", help="Exit 0 once no job is due."
        )
        parser.add_argument("--max-jobs", type=positive_int, help="Exit after this many jobs.")
        parser.add_argument(
            "--max-seconds", type=positive_float, help="Claim no more after this many seconds."
        )
        parser.add_argument(
            "--sleep", type=non_negative_float,
            help="Seconds an idle worker waits before looking again (default: LATERITE_QUEUE_POLL).",
        )
        parser.add_argument("--name", help="This worker's name, shown as claimed_by.")
        parser.add_argument(
            "--batch", type=positive_int, default=1,
            help="Claim up to this many due jobs at once (default 1).",
        )

    def handle(self, *args, **options) -> None:
        queues = options["queues"] or list(settings.QUEUES)
        worker = Worker(
            queues,
            name=options["name"],
            batch=options["batch"],
            once=options["once"],
            stop_when_empty=options["stop_when_empty"],
            max_jobs=options["max_jobs"],
            max_seconds=options["max_seconds"],
            sleep=options["sleep"],
        )
        try:
            worker.store.ping()
        except StoreUnavailable as e:
            # Not fatal: the worker keeps retrying with backoff until the store answers.
            self.stderr.write(f"{e}; waiting for it to come back.")

        def stop_now() -> None:
            raise WorkerStopped

        with stop_signals(worker.stop, stop_now):
            try:
                worker.run()
            except KeyboardInterrupt as e:  # pragma: no cover - handlers replace SIGINT
                raise CommandError("Interrupted") from e
