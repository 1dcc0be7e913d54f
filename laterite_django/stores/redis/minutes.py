"""The overview's counts in Redis: one hash per minute, `P:minutes:<minute number>`,
fields `succeeded:<queue>` and `failed:<queue>`, expiring after `minutes.KEEP`."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from ...core.minutes import KEEP, Minute, minute_start
from .values import text

if TYPE_CHECKING:
    from .store import RedisStore

__all__ = ["add", "read"]


def _number(moment: datetime) -> int:
    return int(moment.timestamp() // 60)


def add(store: RedisStore, minutes: Sequence[Minute]) -> None:
    if not minutes:
        return
    pipe = store.client.pipeline(transaction=False)
    keep = int(KEEP.total_seconds())
    for m in minutes:
        key = store.key("minutes", str(_number(m.minute)))
        if m.succeeded:
            pipe.hincrby(key, f"succeeded:{m.queue}", m.succeeded)
        if m.failed:
            pipe.hincrby(key, f"failed:{m.queue}", m.failed)
        pipe.expire(key, keep)
    pipe.execute()


def read(store: RedisStore, since: datetime) -> list[Minute]:
    last = _number(datetime.now(UTC))
    first = max(_number(minute_start(since)), last - int(KEEP.total_seconds() // 60))
    numbers = range(first, last + 1)
    pipe = store.client.pipeline(transaction=False)
    for number in numbers:
        pipe.hgetall(store.key("minutes", str(number)))
    found = []
    for number, fields in zip(numbers, pipe.execute(), strict=True):
        by_queue: dict[str, list[int]] = {}
        for field, value in fields.items():
            kind, queue = text(field).split(":", 1)
            pair = by_queue.setdefault(queue, [0, 0])
            pair[0 if kind == "succeeded" else 1] += int(value)
        moment = datetime.fromtimestamp(number * 60, UTC)
        found += [Minute(queue, moment, s, f) for queue, (s, f) in sorted(by_queue.items())]
    return found
