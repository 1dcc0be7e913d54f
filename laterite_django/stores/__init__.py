"""Choose the store LATERITE_QUEUE_STORE names, built once per configuration."""

from __future__ import annotations

import threading

from django.utils.module_loading import import_string

from ..conf import settings
from ..core.values import Claim, NewJob, QueueCounts, Running
from ..exceptions import LateriteConfigurationError
from .base import Store

__all__ = ["Claim", "NewJob", "QueueCounts", "Running", "Store", "get_store", "reset_store"]

STORE_CLASSES = {
    "database": "laterite_django.stores.database.DatabaseStore",
    "redis": "laterite_django.stores.redis.RedisStore",
}

_store: Store | None = None
_lock = threading.Lock()


def build_store(kind: str | None = None) -> Store:
    """Return a new store of `kind` (default: LATERITE_QUEUE_STORE) as configured."""
    kind = kind or settings.STORE
    try:
        path = STORE_CLASSES[kind]
    except (KeyError, TypeError):
        raise LateriteConfigurationError(
            f"LATERITE_QUEUE_STORE is {kind!r}; allowed: {', '.join(STORE_CLASSES)}."
        ) from None
    cls = import_string(path)
    if kind == "redis":
        return cls(database=settings.DATABASE, alias=settings.REDIS, prefix=settings.PREFIX,
                   ephemeral=settings.REDIS_EPHEMERAL, cluster=settings.REDIS_CLUSTER)
    return cls(database=settings.DATABASE)


def get_store() -> Store:
    """Return the configured store, shared by the whole process."""
    global _store
    store = _store
    if store is None:
        with _lock:
            if _store is None:
                _store = build_store()
            store = _store
    return store


def reset_store() -> None:
    """Forget the shared store so the next get_store() reads the settings again."""
    global _store
    with _lock:
        _store = None


def on_setting_changed(setting: str, **kwargs: object) -> None:
    """Reset the shared store when a setting it depends on changes (tests)."""
    if setting.startswith("LATERITE_QUEUE_") or setting in {"CACHES", "DATABASES"}:
        reset_store()
