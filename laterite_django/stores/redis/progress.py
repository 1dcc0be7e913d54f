"""A running job's progress in Redis: a field `progress` of its job hash.

Written only while the claim's token is the job's (one Lua script for a batch of
jobs), read with the token so that a value left by an earlier attempt is not shown
(see `progress`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ...core.progress import Progress
from ...core.values import Claim, Running
from . import scripts as calls
from .values import text

if TYPE_CHECKING:
    from .store import RedisStore

__all__ = ["running", "save"]

_FIELDS = ("name", "queue", "attempts", "claimed_by", "progress", "token")


def save(store: RedisStore, items: Sequence[tuple[Claim, str]]) -> int:
    if not items:
        return 0
    args: list[Any] = [store.prefix]
    for claim, stored in items:
        args += [claim.id, claim.token, stored]
    return int(calls.run(store.client, "save_progress", args))


def running(store: RedisStore, limit: int) -> list[Running]:
    names = store.queues()
    if not names:
        return []
    pipe = store.client.pipeline(transaction=False)
    for queue in names:
        pipe.zrange(store.key("queue", queue, "claimed"), 0, -1)
    ids = sorted({int(member) for members in pipe.execute() for member in members})[:limit]
    if not ids:
        return []
    pipe = store.client.pipeline(transaction=False)
    for id_ in ids:
        pipe.hmget(store.key("job", str(id_)), _FIELDS)
    found = []
    for id_, row in zip(ids, pipe.execute(), strict=True):
        name, queue, attempts, claimed_by, progress, token = row
        if name is None:
            continue  # settled meanwhile
        found.append(Running(id=id_, name=text(name), queue=text(queue),
                             attempts=int(attempts or 0), claimed_by=text(claimed_by or b""),
                             progress=Progress.parse(progress, token)))
    return found
