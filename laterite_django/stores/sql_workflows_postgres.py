"""PostgreSQL: the finished jobs of batches deleted and counted in one statement, alone
(COUNTED_DELETE, in a transaction that may push more) or with the next claim
(COUNTED_CLAIM, the batch drain's hot path: one round trip, as the plain drain's).

The statement deletes the jobs whose claims are still held and moves their batches'
`pending` by the jobs it deleted, in one snapshot. Counted once: a job's row is
deleted once, and a job of the same batch and position whose end was already
counted another way (failed for good, then retried from the failed list; its
`BatchEnd` row stays until the batch finishes) is not counted again. The UPDATE of a
batch's row locks it, so exactly one statement takes `pending` to 0.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .sql import COLUMNS, TABLE
from .sql_postgres import CLAIM_UPDATE, DELETE, PICKED

__all__ = ["COUNTED_CLAIM", "COUNTED_DELETE", "counted_claim_params", "counted_delete_params"]

# Params: ids, tokens (of the finished claims), then ids, batches, positions (of those
# of a batch). `d`: the jobs deleted; `u`: each batch counted, its row as moved.
_COUNT = (
    f"WITH d AS ({DELETE} RETURNING {TABLE}.id), "
    f"c AS (SELECT b.batch AS batch_id, count(*) AS n "
    f"FROM unnest(%s::bigint[], %s::bigint[], %s::int[]) AS b(id, batch, pos) "
    f"JOIN d ON d.id = b.id WHERE NOT EXISTS (SELECT 1 FROM laterite_batch_end x "
    f"WHERE x.batch_id = b.batch AND x.position = b.pos) GROUP BY b.batch), "
    f"u AS (UPDATE laterite_batch SET pending = pending - c.n FROM c "
    f"WHERE laterite_batch.id = c.batch_id AND finished_at IS NULL "
    f"RETURNING laterite_batch.id, pending, failed, allow_failures, caught_at, "
    f"cancelled_at, then_call, catch_call, finally_call)"
)

# Params: _COUNT's. One row per batch counted (or one row of NULLs), each led by the
# number of jobs deleted. A batch taken to 0 gets its callbacks pushed by the caller,
# in the same transaction.
COUNTED_DELETE = (
    f"{_COUNT} SELECT (SELECT count(*) FROM d)::int, u.* FROM (SELECT 1) one "
    f"LEFT JOIN u ON true"
)

# Params: _COUNT's, then sql_postgres.claim_params(). Rows: the claimed jobs (`sql.COLUMNS`),
# each followed by the ids of the batches the statement took to 0 (NULL for none); one
# row of NULL columns when it claimed nothing. The callbacks of those batches are
# pushed after the commit (workflows.counts.finish_settled).
COUNTED_CLAIM = (
    f"{_COUNT}, {PICKED}, claimed AS ({CLAIM_UPDATE}) "
    f"SELECT {', '.join(f'claimed.{c}' for c in COLUMNS)}, s.settled "
    f"FROM (SELECT array_agg(id) AS settled FROM u WHERE pending <= 0) s "
    f"LEFT JOIN claimed ON true"
)


def counted_claim_params(claims: Sequence[Any], ends: Sequence[tuple[int, int, int]],
                         claim: Sequence[Any]) -> list[Any]:
    """COUNTED_CLAIM's parameters: COUNTED_DELETE's, then the claim's."""
    return [*counted_delete_params(claims, ends), *claim]


def counted_delete_params(claims: Sequence[Any], ends: Sequence[tuple[int, int, int]]
                          ) -> list[Any]:
    """COUNTED_DELETE's parameters: the claims, and (claim id, batch, position) per end."""
    return [[c.id for c in claims], [c.token for c in claims],
            [e[0] for e in ends], [e[1] for e in ends], [e[2] for e in ends]]
