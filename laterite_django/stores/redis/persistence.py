"""Whether the queue's Redis keeps anything on disk: a server with neither AOF nor RDB
snapshots loses every job at a restart, and the batches whose jobs it held never end.

Read with CONFIG GET (`appendonly`, `save`). A server that forbids CONFIG (managed
services rename it, and persist) is not warned of: INFO tells whether AOF is on,
not whether snapshots are, and what cannot be read is not guessed at.
"""

from __future__ import annotations

from typing import Any

__all__ = ["persistence_warning"]


def persistence_warning(client: Any, where: str) -> str | None:
    """Return the warning for a Redis server (`where` names it) that keeps nothing on
    disk, or None when it persists or its settings cannot be read."""
    from redis.exceptions import ResponseError

    try:
        appendonly = client.config_get("appendonly").get("appendonly")
        save = client.config_get("save").get("save")
    except ResponseError:  # CONFIG renamed or forbidden
        return None
    if appendonly is None or save is None:
        return None
    if _text(appendonly) == "yes" or _text(save).strip():
        return None
    return (f"Redis at {where} keeps nothing on disk (appendonly no, save \"\"): a restart "
            f"loses every job waiting, delayed or running, and the open batches whose jobs "
            f"it held never finish. Turn on appendonly yes (or RDB snapshots with save) on "
            f"the queue's server, or set LATERITE_QUEUE_REDIS_EPHEMERAL = True if losing "
            f"them is meant.")


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
