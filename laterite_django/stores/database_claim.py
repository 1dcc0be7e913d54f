"""How the database store claims jobs: the plain claim, one statement that also deletes
the worker's finished jobs, or the limited claim (sql_limits) when a limit may apply;
finished jobs of a chain or batch are settled first (database_workflows). A mixin of
DatabaseStore."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from operator import attrgetter
from types import ModuleType
from typing import TYPE_CHECKING, Any

from django.utils import timezone

from ..flow.limits import any_job_limited, queue_limits
from ..workflows.ending import any_marked
from . import database_workflows, sql_limits, sql_postgres
from .base import Claim
from .database_wait import aware
from .errors import guarded
from .pg_callers_transaction import keeps_callers_settings

__all__ = ["DatabaseClaiming"]


def _claim_from_row(row: Sequence) -> Claim:
    """A claim from a row of `sql.COLUMNS`."""
    return Claim(
        id=row[0],
        name=row[1],
        queue=row[2],
        payload=row[3],
        attempts=row[4],
        pushed_at=aware(row[5]),
        token=row[6],
        retry_until=aware(row[7]),
        unique_key=row[8],
        priority=row[9],
        last_error=row[10] or "",
        available_at=aware(row[11]),
        position=row[12],
        uncounted=row[13],
        cancel_requested=row[14] is not None,
    )


class DatabaseClaiming:
    """DatabaseStore's claim and settle_and_claim."""

    if TYPE_CHECKING:  # the store's own
        @property
        def dialect(self) -> ModuleType: ...
        @property
        def connection(self) -> Any: ...
        def _ts(self, value: datetime | None) -> Any: ...
        def _run_all(self, statements: Sequence[tuple[str, list]]) -> list: ...
        def delete(self, claims: Sequence[Claim]) -> int: ...

    @guarded
    def claim(self, queues: Sequence[str], worker: str, limit: int = 1) -> list[Claim]:
        return self.settle_and_claim((), queues, worker, limit)

    @guarded
    @keeps_callers_settings
    def settle_and_claim(
        self, finished: Sequence[Claim], queues: Sequence[str], worker: str, limit: int = 1
    ) -> list[Claim]:
        return self._settle_and_claim(finished, queues, worker, limit)

    def _settle_and_claim(
        self, finished: Sequence[Claim], queues: Sequence[str], worker: str, limit: int
    ) -> list[Claim]:
        """settle_and_claim's work, also run inside the store's own transaction (a
        workflow's settle, database_workflows), where the claim's settings stay."""
        if not queues or limit < 1:
            self.delete(finished)
            return []
        # A queue listed twice is read once. Read again in the same statement, its rows
        # (locked by that statement, so not skipped) would be picked twice.
        queues = list(dict.fromkeys(queues))
        if finished and any_marked(finished):
            return database_workflows.settle_and_claim(self, finished, queues, worker, limit)  # type: ignore[arg-type]
        limits = queue_limits(queues)
        keys = any_job_limited()
        if limits or keys:
            # A limit may apply: the limited claim (sql_limits); else the plain one below.
            rows = sql_limits.claim(self, finished, uuid.uuid4().hex, timezone.now(), worker,  # type: ignore[arg-type]
                                    queues, limit, limits, keys)
            return sorted(map(_claim_from_row, rows), key=attrgetter("position"))
        token = uuid.uuid4().hex
        dialect = self.dialect
        found: Sequence[Sequence[Any]] | None = None
        now = None  # PostgreSQL's clock dates its claims (sql_postgres.NOW)
        if dialect is sql_postgres:
            found = sql_postgres.run_claim(self.connection, finished, token, worker,
                                           queues, limit)
        else:
            now = self._ts(timezone.now())
        if found is None:
            found = self._run_all(dialect.claim(finished, token, now, worker, queues, limit))
        claims = [_claim_from_row(row) for row in found]
        claims.sort(key=attrgetter("position"))
        return claims
