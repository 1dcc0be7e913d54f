"""The live workers' list on the Redis store (a mixin of RedisStore): a hash per worker,
`P:workers:<id>`, and the sorted set `P:workers` of the ids by their last beat, both
dated by the server's clock (TIME) and written by one script (lua/worker_beat.lua).
A lost worker's hash expires `core.workers.KEEP_LOST` after its last beat; its id
leaves the set at the next beat of any worker."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ...core.workers import KEEP_LOST, WorkerInfo
from ..errors import guarded
from .values import dt, text, us

if TYPE_CHECKING:
    from redis import Redis

__all__ = ["WorkerEntries"]


class WorkerEntries:
    """RedisStore's methods for the live workers' list (see Store.beat_worker)."""

    if TYPE_CHECKING:  # RedisStore's
        @property
        def client(self) -> Redis: ...

        def key(self, *parts: str) -> str: ...
        def _run(self, name: str, args: Sequence[Any]) -> Any: ...

    @guarded
    def beat_worker(self, info: WorkerInfo) -> None:
        fields = {"name": info.name, "host": info.host, "pid": info.pid,
                  "version": info.version, "queues": json.dumps(list(info.queues)),
                  "concurrency": info.concurrency, "started_at": us(info.started_at),
                  "jobs": json.dumps(list(info.jobs))}
        pairs = [value for pair in fields.items() for value in pair]
        self._run("worker_beat", [info.id, int(KEEP_LOST.total_seconds()), *pairs])

    @guarded
    def remove_worker(self, worker_id: str) -> None:
        pipe = self.client.pipeline(transaction=True)
        pipe.delete(self.key("workers", worker_id))
        pipe.zrem(self.key("workers"), worker_id)
        pipe.execute()

    @guarded
    def workers(self) -> list[WorkerInfo]:
        pipe = self.client.pipeline(transaction=False)
        pipe.time()
        pipe.zrange(self.key("workers"), 0, -1)
        (seconds, micros), ids = pipe.execute()
        now = int(seconds) * 1_000_000 + int(micros)
        ids = [text(member) for member in ids]
        pipe = self.client.pipeline(transaction=False)
        for worker_id in ids:
            pipe.hgetall(self.key("workers", worker_id))
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
