"""The limited claim's statements on PostgreSQL where only queue limits apply (no job
registered in the worker's process declares `concurrency`): the plain claim's pick,
cut to each queue's room, under the queues' locks (see `sql_limits` for why racing
workers never together exceed a limit with them).

Two statements and the commit, sent together in one round trip
(`sql_postgres.execute_pipeline`), each with its own snapshot (READ COMMITTED):

1. QUEUES: take the lock of each limited queue (waiting for it), in the order every
   limited claim takes them (`sql_limits_postgres`), and set the transaction's
   settings.
2. CLAIM: in a snapshot taken after every lock was granted, delete the finished jobs;
   count each queue's room: its concurrency less its running jobs, plus those of
   them this statement deletes (its own snapshot still sees them running), and its
   rate less its recent starts; claim the first waiting jobs of each queue up to its
   room (`FOR UPDATE SKIP LOCKED`, as the plain claim picks); record the starts,
   prune those past their period.

Concurrency keys are not looked at, as by the plain claim that such a worker makes
where no queue is limited: a worker that can run a job with `concurrency` has it
registered, and so makes the keyed claim (`sql_limits_postgres`), which counts them.
Without their lookup a claim costs two statements where that one takes four, and no
id is handed from one statement to the next.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..flow.limits import QueueLimit
from .base import Claim
from .pg_quiet import WAKES_QUIET
from .sql import COLUMNS, TABLE
from .sql_limits_postgres import NO_LIMIT, QUEUE_LOCK_IDS, SETTINGS, STARTS
from .sql_postgres import DELETE_FINISHED, NOW, due_in_order

__all__ = ["statements"]

# Params: limited queue names. The settings are the keyed claim's (see SETTINGS there),
# whose lack of bitmap scans matters here: the running jobs are counted through the
# index of claimed jobs, whose entries for deleted rows a plain index scan marks dead
# as it passes them; a bitmap scan never does, and so reads again, at every claim,
# every row claimed since the last VACUUM (with autovacuum off, 160,000 jobs later:
# 3 ms of a 3.4 ms claim).
# No hash or merge join either: the generic plan takes a claim for thousands of rows, and
# hashed the whole job table to find the few it claims.
_QUEUES = (
    f"SELECT count(pg_advisory_xact_lock(id)), {SETTINGS}, "
    f"set_config('enable_hashjoin', 'off', true), set_config('enable_mergejoin', 'off', true) "
    f"FROM {QUEUE_LOCK_IDS}"
)

# Params: limit. Each queue's due jobs, up to its room (see due_in_order).
_DUE = due_in_order("room.name", NOW, "GREATEST(LEAST(room.room, %s), 0)",
                    "ctid, id, priority, available_at", " FOR UPDATE SKIP LOCKED")

# Params: ids, tokens (finished); queues, concurrency, rate, period (arrays, NULL for
# none); NO_LIMIT, NO_LIMIT, limit, limit, token, worker. Times are the server's
# (sql_postgres.NOW).
_CLAIM = (
    f"WITH done AS ({DELETE_FINISHED} RETURNING {TABLE}.queue), "
    f"q AS (SELECT * FROM unnest(%s::varchar[], %s::int[], %s::int[], %s::float8[]) "
    f"WITH ORDINALITY AS q(name, conc, rate, period, ord)), "
    # The starts past their period go (under the queue's lock: one claim at a time).
    f"pruned AS (DELETE FROM {STARTS} s USING q WHERE s.queue = q.name AND q.rate IS NOT NULL "
    f"AND s.started_at <= {NOW} - make_interval(secs => q.period) RETURNING 1), "
    # Materialized: each count runs once per claim, and only for a queue with that limit.
    # A job deleted by `done` was claimed by this worker's previous claim, committed
    # before this snapshot: the count has it, and it is given back, no more.
    f"room AS MATERIALIZED (SELECT q.name, q.ord, LEAST("
    f"CASE WHEN q.conc IS NULL THEN %s ELSE q.conc - (SELECT count(*) FROM {TABLE} r "
    f"WHERE r.queue = q.name AND r.token IS NOT NULL) "
    f"+ (SELECT count(*) FROM done WHERE done.queue = q.name) END, "
    f"CASE WHEN q.rate IS NULL THEN %s ELSE q.rate - (SELECT count(*) FROM {STARTS} s "
    f"WHERE s.queue = q.name AND s.started_at > {NOW} "
    f"- make_interval(secs => q.period)) END) AS room "
    f"FROM q), "
    # The plain claim's pick (sql_postgres), each queue's rows cut to its room.
    f"picked AS (SELECT ctid, id, "
    f"row_number() OVER (ORDER BY ord, priority DESC, available_at, id) - 1 AS position "
    f"FROM (SELECT room.ord, j.ctid, j.id, j.priority, j.available_at FROM room "
    f"CROSS JOIN LATERAL ({_DUE}) j ORDER BY room.ord LIMIT %s) found), "
    f"claimed AS (UPDATE {TABLE} SET token = %s, claimed_at = {NOW}, "
    f"claimed_by = %s || {WAKES_QUIET}, "
    f"attempts = attempts + 1, claim_position = picked.position FROM picked "
    # By the row's address, as the keyed claim does (it is locked: it stays there), found
    # by a TID scan (sql_postgres.CLAIM_UPDATE).
    f"WHERE {TABLE}.ctid = ANY(ARRAY(SELECT ctid FROM picked)) "
    f"AND {TABLE}.ctid = picked.ctid AND {TABLE}.id = picked.id "
    f"RETURNING {', '.join(f'{TABLE}.{c}' for c in COLUMNS)}), "
    f"started AS (INSERT INTO {STARTS} (queue, started_at) SELECT c.queue, {NOW} FROM claimed c "
    f"JOIN q ON q.name = c.queue WHERE q.rate IS NOT NULL RETURNING 1) "
    f"SELECT {', '.join(COLUMNS)} FROM claimed "
    f"WHERE (SELECT count(*) FROM started) + (SELECT count(*) FROM pruned) >= 0"
)


def statements(
    finished: Sequence[Claim], token: str, worker: str, queues: Sequence[str],
    limit: int, limits: dict[str, QueueLimit],
) -> list[tuple[str, list[Any]]]:
    """QUEUES and CLAIM with their parameters, to run in this order in one transaction;
    CLAIM returns the claimed rows."""
    plain = [limits.get(q, QueueLimit()) for q in queues]
    claim = [
        [c.id for c in finished], [c.token for c in finished],
        list(queues), [lim.concurrency for lim in plain], [lim.rate for lim in plain],
        [lim.period for lim in plain], NO_LIMIT, NO_LIMIT, limit, limit, token, worker,
    ]
    return [(_QUEUES, [sorted(limits)]), (_CLAIM, claim)]
