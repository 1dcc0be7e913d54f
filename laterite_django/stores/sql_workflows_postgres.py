"""PostgreSQL: the finished jobs of batches deleted and counted in one statement, sent
with the next claim in one round trip (the batch drain's hot path; the database
store's `database_workflows.delete_marked` uses it when no chain link is due).

The statement deletes the jobs whose claims are still held, inserts a `BatchEnd` row
for each deleted job of a batch (ON CONFLICT DO NOTHING: counted once) and moves the
batches' `pending` by the rows inserted, all in one snapshot, returning the number
deleted and each updated batch's row. A batch the statement took to 0 gets its
callbacks pushed by the caller, in the same transaction, before the commit.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .sql import TABLE
from .sql_postgres import DELETE

__all__ = ["COUNTED_DELETE", "counted_delete_params"]

# Params: ids, tokens (of the finished claims), then ids, batches, positions (of those
# of a batch). One row per updated batch (or one row of NULLs), each led by the
# number of jobs deleted.
COUNTED_DELETE = (
    f"WITH d AS ({DELETE} RETURNING {TABLE}.id), "
    f"e AS (INSERT INTO laterite_batch_end (batch_id, position) "
    f"SELECT b.batch, b.pos FROM unnest(%s::bigint[], %s::bigint[], %s::int[]) "
    f"AS b(id, batch, pos) JOIN d ON d.id = b.id "
    f"ON CONFLICT DO NOTHING RETURNING batch_id), "
    f"c AS (SELECT batch_id, count(*) AS n FROM e GROUP BY batch_id), "
    f"u AS (UPDATE laterite_batch SET pending = pending - c.n FROM c "
    f"WHERE laterite_batch.id = c.batch_id AND finished_at IS NULL "
    f"RETURNING laterite_batch.id, pending, failed, allow_failures, caught_at, "
    f"cancelled_at, then_call, catch_call, finally_call) "
    f"SELECT (SELECT count(*) FROM d)::int, u.* FROM (SELECT 1) one LEFT JOIN u ON true"
)


def counted_delete_params(claims: Sequence[Any], ends: Sequence[tuple[int, int, int]]
                          ) -> list[Any]:
    """COUNTED_DELETE's parameters: the claims, and (claim id, batch, position) per end."""
    return [[c.id for c in claims], [c.token for c in claims],
            [e[0] for e in ends], [e[1] for e in ends], [e[2] for e in ends]]
