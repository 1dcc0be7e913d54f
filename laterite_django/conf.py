"""Every LATERITE_QUEUE_* setting, read from django.conf.settings at each access.

Reading on access (not at import) lets `override_settings` reach them in tests.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings as django_settings

__all__ = ["DEFAULTS", "MODES", "STORES", "settings"]

MODES = ("external", "worker", "inline")
STORES = ("database", "redis")

DEFAULTS: dict[str, Any] = {
    "MODE": "external",
    "STORE": "database",
    "DATABASE": "default",
    "REDIS": "default",
    "PREFIX": "laterite",
    "QUEUES": ["default"],
    "RETRY_AFTER": 90,
    "POLL": 1,
    "WORKERS": 2,
    "SHUTDOWN_GRACE": 5,
}


class Settings:
    """Attribute access to LATERITE_QUEUE_<NAME>, falling back to DEFAULTS."""

    def __getattr__(self, name: str) -> Any:
        if name not in DEFAULTS:
            raise AttributeError(name)
        return getattr(django_settings, f"LATERITE_QUEUE_{name}", DEFAULTS[name])


settings = Settings()
