"""The live workers' list on the Redis store (`WorkerEntries`, owned by RedisStore): a
hash per worker, `P:workers:<id>`, and the sorted set `P:workers` of the ids by their
last beat, both dated by the server's clock (TIME) and written by one script
(lua/worker_beat.lua).
A lost worker's hash expires `core.workers.KEEP_LOST` after its last beat; its id
leaves the set at the next beat of any worker."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ...core.workers import KEEP_LOST, WorkerInfo
from .values import dt, text, us

if TYPE_CHECKING:
    from redis import Redis

__all__ = ["WorkerEntries"]


class WorkerEntries:
    """A Redis store's live workers' list (Store.beat_worker, remove_worker, workers)."""

    def __init__(self, prefix: str, client: Callable[[], Redis],
                 run: Callable[[str, Sequence[Any]], Any]) -> None:
        self.prefix = prefix
        self._client = client  # the store's client, connected on first use
        self._run = run  # runs a script (lua/<name>.lua) with the prefix

    def beat(self, info: WorkerInfo) -> None:
        """Write the entry of `info`'s worker, beaten now by the server's clock."""
        fields = {"name": info.name, "host": info.host, "pid": info.pid,
                  "version": info.version, "queues": json.dumps(list(info.queues)),
                  "concurrency": info.concurrency, "started_at": us(info.started_at),
                  "jobs": json.dumps(list(info.jobs))}
        pairs = [value for pair in fields.items() for value in pair]
        self._run("worker_beat", [info.id, int(KEEP_LOST.total_seconds()), *pairs])

    def remove(self, worker_id: str) -> None:
        pipe = self._client().pipeline(transaction=True)
        pipe.delete(f"{self.prefix}:workers:{worker_id}")
        pipe.zrem(f"{self.prefix}:workers", worker_id)
        pipe.execute()

    def read(self) -> list[WorkerInfo]:
        """Every worker listed, by host and pid, each with its age by the server's clock."""
        client = self._client()
        pipe = client.pipeline(transaction=False)
        pipe.time()
        pipe.zrange(f"{self.prefix}:workers", 0, -1)
        (seconds, micros), ids = pipe.execute()
        now = int(seconds) * 1_000_000 + int(micros)
        ids = [text(member) for member in ids]
        pipe = client.pipeline(transaction=False)
        for worker_id in ids:
            pipe.hgetall(f"{self.prefix}:workers:{worker_id}")
        found = []
        for worker_id, raw in zip(ids, pipe.execute() if ids else [], strict=True):
            if not raw:
                continue  # expired: lost longer than KEEP_LOST
            entry = {text(k): text(v) for k, v in raw.items()}
            beat = int(entry["beat_at"])
            found.append(WorkerInfo(
                id=worker_id, name=entry["name"], host=entry["host"], pid=int(entry["pid"]),
                version=entry["version"], queues=list(json.loads(entry["queues"])),
                concurrency=int(entry["concurrency"]), started_at=dt(entry["started_at"]),
                jobs=[int(i) for i in json.loads(entry["jobs"])], beat_at=dt(beat),
                age=max(0.0, (now - beat) / 1_000_000),
            ))
        return sorted(found, key=lambda w: (w.host, w.pid, w.id))
