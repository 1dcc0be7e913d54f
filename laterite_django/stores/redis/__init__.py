"""The `redis` store: jobs kept in Redis through a django-redis cache's raw client."""

from .store import RedisStore

__all__ = ["RedisStore"]
