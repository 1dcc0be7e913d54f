"""Re-encrypt stored jobs under the first key: `manage.py queue_rekey [--chunk N]`."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ... import encryption
from ...stores import get_store
from ..arguments import positive_int
from ..store_check import StoreCommand

Read = Callable[[int, int], list[tuple[int, str]]]
Write = Callable[[Sequence[tuple[int, str, str]]], int]


class Command(StoreCommand):
    help = ("Re-encrypt the encrypted arguments of waiting, delayed and failed jobs under "
            "the first key of LATERITE_QUEUE_ENCRYPTION_KEYS, a chunk at a time, while "
            "workers run. A job claimed meanwhile is left as it is. Resumable: each chunk "
            "says the last id done; start again with --after (--failed-after).")

    def add_arguments(self, parser) -> None:
        parser.add_argument("--chunk", type=positive_int, default=500,
                            help="Jobs read and written per round trip (default 500).")
        parser.add_argument("--after", type=int, default=0, metavar="ID",
                            help="Start after this job id (resume a run).")
        parser.add_argument("--failed-after", type=int, default=0, metavar="ID",
                            help="Start the failed list after this id (resume a run).")

    def handle(self, *args, **options) -> None:
        encryption.keyring()  # no key listed, or no cryptography: say so before any work
        store = get_store()
        chunk = options["chunk"]
        jobs = self._walk("jobs", store.unclaimed_payloads, store.replace_payloads,
                          options["after"], chunk, "--after")
        failed = self._walk("failed jobs", store.failed_payloads,
                            store.replace_failed_payloads, options["failed_after"], chunk,
                            "--failed-after")
        self.stdout.write(f"Re-encrypted {jobs} waiting or delayed job(s) and {failed} failed "
                          f"job(s) under key {encryption.keyring().current_id!r}.")

    def _walk(self, what: str, read: Read, write: Write, after: int, chunk: int,
              resume: str) -> int:
        """Re-encrypt every row `read` gives, a chunk at a time; return how many."""
        done = 0
        while True:
            rows = read(after, chunk)
            if not rows:
                return done
            changes = []
            for row_id, text in rows:
                try:
                    new = encryption.resealed(text)
                except encryption.UndecryptableError as e:
                    self.stderr.write(f"{what} #{row_id} left as it is: it cannot be "
                                      f"decrypted: {e}")
                    continue
                if new is not None:
                    changes.append((row_id, text, new))
            done += write(changes) if changes else 0
            after = rows[-1][0]
            self.stdout.write(f"{what}: done up to #{after} ({done} re-encrypted; resume "
                              f"with {resume} {after})")
