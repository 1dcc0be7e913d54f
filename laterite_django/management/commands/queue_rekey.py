"""Re-encrypt stored jobs under the first key: `manage.py queue_rekey [--chunk N]`."""

from __future__ import annotations

from typing import Any

from ... import encryption
from ...stores import get_store
from ..arguments import positive_int
from ..at_rest import Place, places
from ..store_check import StoreCommand


class Command(StoreCommand):
    help = ("Re-encrypt the encrypted arguments of waiting, delayed and failed jobs, of "
            "the outbox's jobs, the batches' callbacks and the job history (on Redis, its "
            "records waiting to be moved to the table too), and encrypted "
            "tasks' result values, under the first key of "
            "LATERITE_QUEUE_ENCRYPTION_KEYS, a chunk at a time, while workers run. A job "
            "claimed meanwhile is left as it is. Resumable: each chunk says the last id "
            "done; start again with --after (--failed-after, --outbox-after).")

    def add_arguments(self, parser) -> None:
        parser.add_argument("--chunk", type=positive_int, default=500,
                            help="Jobs read and written per round trip (default 500).")
        parser.add_argument("--after", type=int, default=0, metavar="ID",
                            help="Start after this job id (resume a run).")
        parser.add_argument("--failed-after", type=int, default=0, metavar="ID",
                            help="Start the failed list after this id (resume a run).")
        parser.add_argument("--outbox-after", type=int, default=0, metavar="ID",
                            help="Start the outbox after this id (resume a run).")

    def handle(self, *args, **options) -> None:
        encryption.keyring()  # no key listed, or no cryptography: say so before any work
        chunk = options["chunk"]
        done: dict[str, int] = {}
        for place in places(get_store()):
            after = options[place.resume.removeprefix("--").replace("-", "_")] if (
                place.resume) else place.start
            done[place.what] = self._walk(place, after, chunk)
        others = ", ".join(f"{count} {what}" for what, count in list(done.items())[2:] if count)
        self.stdout.write(
            f"Re-encrypted {done['waiting or delayed jobs']} waiting or delayed job(s) and "
            f"{done['failed jobs']} failed job(s){f' ({others})' if others else ''} under key "
            f"{encryption.keyring().current_id!r}.")

    def _walk(self, place: Place, after: Any, chunk: int) -> int:
        """Re-encrypt every row of `place` after id `after`, a chunk at a time; return
        how many."""
        done = 0
        while True:
            rows = place.read(after, chunk)
            if not rows:
                return done
            changes = []
            for row_id, text in rows:
                try:
                    new = encryption.resealed(text)
                except encryption.UndecryptableError as e:
                    self.stderr.write(f"{place.what} #{row_id} left as it is: it cannot be "
                                      f"decrypted: {e}")
                    continue
                if new is not None:
                    changes.append((row_id, text, new))
            done += place.write(changes) if changes else 0
            after = rows[-1][0]
            resume = f"; resume with {place.resume} {after}" if place.resume else ""
            self.stdout.write(f"{place.what}: done up to #{after} ({done} re-encrypted"
                              f"{resume})")
