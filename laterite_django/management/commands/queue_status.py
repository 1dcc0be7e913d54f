"""Show what waits: `manage.py queue_status [--json]` (waiting, delayed, running, failed per queue).

Then the running jobs (of the first 50) that reported their progress (`cx.progress`);
in `--json`, each queue's `running_jobs` (with `progress`, or null). For a fair queue,
the fair keys with the most waiting jobs (`--top-keys`, 10 by default); in `--json`,
each queue's `fair_keys` (null for a queue not served fairly). Then the held sequences
(core/sequences.py: a failed head holds the rest of its key); in `--json`, each queue's
`held_sequences` (those a failed job of the queue holds: key, failed_job_id, job_id,
waiting). `queue_forget` of the failed head lets its sequence go on; so does the admin.

`--json` also prints each queue's counts under the names of 0.1, `pending`
(= waiting) and `reserved` (= running), for one more release.
"""

from __future__ import annotations

import argparse
import json

from django.core.management.base import CommandError

from ...conf import settings
from ...core.fairness import TOP_KEYS, WaitingByKey
from ...core.values import QueueCounts, Running
from ...exceptions import StoreUnavailable
from ...stores import get_store
from ..arguments import positive_float, positive_int
from ..store_check import StoreCommand
from ..watch import watch

# The running jobs listed (with their progress), the oldest first.
RUNNING_SHOWN = 50
# The held sequences listed, by key.
HELD_SHOWN = 100


class Command(StoreCommand):
    help = (
        "Show per queue how many jobs are waiting, delayed, running and failed: every "
        "queue of LATERITE_QUEUE_QUEUES, and any other queue that has jobs; then the "
        "sequences a failed head holds."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("--json", action="store_true", help="Print JSON instead of a table.")
        parser.add_argument(
            "--watch", action="store_true",
            help="Redraw the status every second (--interval) with each queue's oldest "
            "waiting job and its jobs succeeded and failed per minute, until Ctrl-C.")
        parser.add_argument("--interval", type=positive_float, default=1.0, metavar="SECONDS",
                            help="With --watch: seconds between two frames (default 1).")
        parser.add_argument("--frames", type=positive_int, help=argparse.SUPPRESS)
        parser.add_argument(
            "--top-keys", type=positive_int, default=TOP_KEYS, metavar="N",
            help=f"For a fair queue: the N fair keys with the most waiting jobs "
            f"(default {TOP_KEYS}).")

    def handle(self, *args, **options) -> None:
        store = get_store()
        if options["watch"]:
            try:
                store.ping()
            except StoreUnavailable:
                raise  # one line, by StoreCommand
            watch(store, lambda text: self.stdout.write(text), interval=options["interval"],
                  frames=options["frames"])
            return
        try:
            store.ping()
            found = store.counts()
            running = store.running(RUNNING_SHOWN)
            paused = store.paused_queues()
            fair = store.fair_waiting(options["top_keys"])
            held = store.held_sequences(HELD_SHOWN)
        except StoreUnavailable:
            raise  # one line, by StoreCommand
        except Exception as e:
            raise CommandError(f"The queue store cannot be read: {e}") from e
        # The configured queues first, in their order, at zero if empty; then the others.
        counts = {queue: found.get(queue, QueueCounts()) for queue in settings.QUEUES}
        counts.update(sorted(found.items()))
        counts.update((queue, QueueCounts()) for queue in sorted(paused) if queue not in counts)
        if options["json"]:
            data = {
                queue: {"waiting": c.waiting, "delayed": c.delayed, "running": c.running,
                        "failed": c.failed, "paused": queue in paused,
                        # The names of 0.1, kept for one more release (see CHANGELOG).
                        "pending": c.waiting, "reserved": c.running,
                        "running_jobs": [_running_json(r) for r in running if r.queue == queue],
                        "fair_keys": _fair_json(fair.get(queue)),
                        "held_sequences": [
                            {"key": h.key, "failed_job_id": h.failed_id, "job_id": h.job_id,
                             "waiting": h.waiting} for h in held if h.queue == queue]}
                for queue, c in counts.items()
            }
            self.stdout.write(json.dumps(data, indent=2))
            return
        header = ("queue", "waiting", "delayed", "running", "failed", "")
        rows = [
            (queue, str(c.waiting), str(c.delayed), str(c.running), str(c.failed),
             "paused" if queue in paused else "")
            for queue, c in counts.items()
        ]
        widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
        for row in [header, *rows]:
            self.stdout.write(
                "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())
        self.stdout.write(f"failed total: {sum(c.failed for c in counts.values())}")
        for queue, waiting in fair.items():
            more = waiting.keys - len(waiting.top)
            self.stdout.write(f"waiting per fair key in {queue}"
                              + (f" (the {len(waiting.top)} with the most of {waiting.keys}):"
                                 if more else ":"))
            width = max(len(_key_text(key)) for key, _ in waiting.top)
            for key, count in waiting.top:
                self.stdout.write(f"  {_key_text(key).ljust(width)}  {count}")
        if held:
            self.stdout.write(f"held sequences (a failed head holds the rest; queue_forget "
                              f"it, or retry it): {len(held)}"
                              + (f" (the first {HELD_SHOWN})" if len(held) >= HELD_SHOWN
                                 else ""))
            width = max(len(h.key) for h in held)
            for h in held:
                head = (f"failed job {h.failed_id} ({h.queue})" if h.failed_id is not None
                        else f"job #{h.job_id}")
                self.stdout.write(f"  {h.key.ljust(width)}  {head}, {h.waiting} waiting "
                                  f"behind it")
        said = [r for r in running if r.progress is not None]
        if said:
            self.stdout.write("progress of running jobs:")
            for r in said:
                assert r.progress is not None
                self.stdout.write(f"  #{r.id} {r.name} on {r.queue} (attempt {r.attempts}, "
                                  f"{r.claimed_by or 'unknown worker'}): "
                                  f"{r.progress.describe()}")


def _key_text(key: str) -> str:
    """A fair key as printed: as stored (an encrypted job's as its keyed hash), or
    "(no key)" for the jobs of a fair queue pushed without one."""
    return key or "(no key)"


def _fair_json(waiting: WaitingByKey | None) -> dict | None:
    """A queue's waiting jobs per fair key in --json; None for a queue not served fairly
    or with no job of a fair key waiting. The jobs without a key have the key ""."""
    if waiting is None:
        return None
    return {"keys": waiting.keys,
            "top": [{"key": key, "waiting": count} for key, count in waiting.top]}


def _running_json(job: Running) -> dict:
    progress = job.progress
    return {"id": job.id, "name": job.name, "attempts": job.attempts,
            "claimed_by": job.claimed_by,
            "progress": None if progress is None else {
                "done": progress.done, "total": progress.total, "note": progress.note,
                "at": progress.at.isoformat() if progress.at else None}}
