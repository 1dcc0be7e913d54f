"""Push a job by name: `manage.py queue_push NAME --payload JSON [--queue Q] [--delay S]`."""

from __future__ import annotations

import json
from datetime import timedelta

from django.core.management.base import CommandError
from django.utils import timezone

from ...conf import settings
from ...context import Pushed
from ...exceptions import InvalidPayload, JobNotRegistered, PushNotReplicated
from ...payload import decode
from ...registry import registry
from ..arguments import json_object, non_negative_float
from ..store_check import StoreCommand


class Command(StoreCommand):
    help = "Push a registered job by its name, with its arguments as JSON."

    def add_arguments(self, parser) -> None:
        parser.add_argument("name", help="The job's name (see registry).")
        parser.add_argument(
            "--payload", type=json_object, default={"args": [], "kwargs": {}},
            help='The arguments: \'{"args": [...], "kwargs": {...}}\'.',
        )
        parser.add_argument("--queue", help="Another queue than the job's own.")
        parser.add_argument("--delay", type=non_negative_float, default=0,
                            help="Seconds before it is due.")

    def handle(self, *args, **options) -> None:
        try:
            job = registry.get(options["name"])
            job_args, job_kwargs = decode(json.dumps(options["payload"]))
        except (JobNotRegistered, InvalidPayload) as e:
            raise CommandError(str(e)) from e
        at = timezone.now() + timedelta(seconds=options["delay"]) if options["delay"] else None
        unconfirmed = None
        try:
            pushed = job.enqueue(job_args, job_kwargs, at=at, queue=options["queue"])
        except PushNotReplicated as e:
            # Queued all the same: exit 0, so that a script does not push it again.
            unconfirmed = e
            pushed = Pushed("queued", e.ids[0]) if e.ids[0] else Pushed("duplicate")
        except (TypeError, ValueError) as e:
            raise CommandError(str(e)) from e
        queue = job.queue if options["queue"] is None else options["queue"]
        listed = list(settings.QUEUES)
        if pushed.status != "ran" and queue not in listed:
            self.stderr.write(
                f"Warning: queue {queue!r} is not in LATERITE_QUEUE_QUEUES ({listed!r}): a "
                f"plain `queue_work` never runs it; run `queue_work --queue {queue}`.",
                self.style.WARNING,
            )
        if pushed.status == "queued":
            self.stdout.write(f"Pushed {job.name} as job {pushed.id} on queue {queue!r}.")
        elif pushed.status == "duplicate":
            self.stdout.write(f"Not pushed: a {job.name} job with the same unique key waits.")
        else:
            self.stdout.write(f"Ran {job.name} inline: {pushed.result!r}")
        if unconfirmed is not None:
            self.stderr.write(f"Warning: {unconfirmed} Do not push it again: it runs unless "
                              f"the primary fails first.", self.style.WARNING)
