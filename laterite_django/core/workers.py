"""The live workers' list: what a running worker says of itself, and when it is lost.

Every `queue_work` process (and the `worker` mode's thread pool) keeps one entry in
its store while it runs, written with the heartbeat it already sends (every
RETRY_AFTER / 3 seconds), removed as it stops cleanly. An entry whose last beat is
older than RETRY_AFTER belongs to a worker that died or was cut off: it is shown
as lost, as its claims are taken for abandoned then. Lost entries are removed by
the stores once their beat is older than `KEEP_LOST`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

__all__ = ["ID_MAX", "KEEP_LOST", "PRUNE_EVERY", "WorkerInfo"]

# How long a lost worker's entry stays listed (as lost) before the stores remove it:
# long enough for an operator to see which host and process went away, and when.
KEEP_LOST = timedelta(hours=1)
# Seconds between two removals of the lost entries by one worker (database stores;
# Redis lets each entry expire).
PRUNE_EVERY = 300.0
# The longest entry id ("<host>:<pid>") a store keeps.
ID_MAX = 200


@dataclass(slots=True)
class WorkerInfo:
    """One worker process as its store lists it.

    `id` is "<host>:<pid>"; `name` is what its claims show as claimed_by. `jobs`
    are the ids of the jobs in its hand (claimed: running or next in its batch).
    `beat_at` is dated by the store's clock, and `age` (seconds since that beat,
    by the same clock) is filled in when the store lists the entries.
    """

    id: str
    name: str
    host: str
    pid: int
    version: str
    queues: list[str]
    concurrency: int
    started_at: datetime
    jobs: list[int] = field(default_factory=list)
    beat_at: datetime | None = None
    age: float = 0.0

    def lost(self, retry_after: float) -> bool:
        """Whether this worker stopped beating longer than `retry_after` seconds ago."""
        return self.age > retry_after

    def as_dict(self, retry_after: float) -> dict[str, object]:
        """A JSON-ready view of the entry (queue_workers --json)."""
        return {
            "id": self.id, "name": self.name, "host": self.host, "pid": self.pid,
            "version": self.version, "queues": list(self.queues),
            "concurrency": self.concurrency, "started_at": self.started_at.isoformat(),
            "beat_at": self.beat_at.isoformat() if self.beat_at else None,
            "beat_age": round(self.age, 3), "jobs": list(self.jobs),
            "lost": self.lost(retry_after),
        }
