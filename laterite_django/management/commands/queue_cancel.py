"""Cancel jobs: `manage.py queue_cancel ID ...`.

A waiting or delayed job goes to the failed list now, as cancelled (queue_retry
can put it back); a running one is told and, if it does not stop, interrupted
after a grace; a job that already finished is left alone, and said so.
"""

from __future__ import annotations

from ...core.cancel import Outcome
from ...flow.cancel import GRACE
from ...stores import get_store
from ..arguments import positive_int
from ..store_check import StoreCommand

_SAID = {
    Outcome.CANCELLED: "cancelled: on the failed list now",
    Outcome.ASKED: f"running: told to stop, interrupted after {GRACE:g} s if it does not",
    Outcome.FINISHED: "not waiting or running (finished already, or no such job): "
                      "nothing changed",
}


class Command(StoreCommand):
    help = "Cancel jobs by id (as the admin and queue_status --json show them)."

    def add_arguments(self, parser) -> None:
        parser.add_argument("ids", nargs="+", type=positive_int, metavar="ID", help="Job ids.")

    def handle(self, *args, **options) -> None:
        outcomes = get_store().cancel(options["ids"])
        for job_id, outcome in outcomes.items():
            self.stdout.write(f"Job {job_id}: {_SAID[outcome]}.")
