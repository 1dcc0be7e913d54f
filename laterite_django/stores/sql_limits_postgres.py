"""The limited claim's statements on PostgreSQL (see `sql_limits` for why racing
workers never together exceed a limit with them).

Four statements and the commit, sent together in one round trip
(`sql_postgres.execute_pipeline`), each with its own snapshot (READ COMMITTED):

1. FIRST: delete the finished jobs.
2. KEYS: choose the candidates (the first waiting jobs of each queue without a
   key or whose key has room) and lock their concurrency keys
   (`pg_try_advisory_xact_lock`: a key another claim holds is skipped, never
   waited for), at most one key per job claimed; the keys locked and the
   candidates' ids are left in transaction-local settings for CLAIM.
3. QUEUES: take the lock of each limited queue (waiting for it).
4. CLAIM: in a snapshot taken after every lock was granted, count (running jobs
   per limited queue and per locked key, recent starts) and claim among the
   candidates still waiting (a keyed one only if its key is locked); record the
   starts, prune those past their period.

A claim that locked keys but took no job (another claim took the jobs it had found
for them, between KEYS and CLAIM) runs once more at once (`sql_limits.claim`).

A lock id is `hashtextextended` of the queue or key with a prefix of its kind: two
names sharing an id share a lock (claims wait or skip more, never less).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..flow.limits import QueueLimit
from .base import Claim
from .pg_quiet import WAKES_QUIET
from .sql import COLUMNS, TABLE
from .sql_postgres import DELETE_FINISHED, NOW, SETTINGS

__all__ = ["NO_LIMIT", "QUEUE_LOCK_IDS", "SETTINGS", "STARTS", "locked_keys", "statements"]

STARTS = "laterite_flow_start"
# Room that stands for "no limit".
NO_LIMIT = 1_000_000
# The settings that hand the locked keys and the candidates' ids from KEYS to CLAIM
# (transaction-local).
KEYS_SETTING = "laterite.keys"
IDS_SETTING = "laterite.ids"
# The waiting jobs a claim looks at per queue, at most (the candidates are the first of
# them without a key or whose key has room): a claim costs the same however many jobs
# of keys at their limit are first in line.
SCAN = 1000
_QUEUE_LOCK = "hashtextextended('laterite:queue:' || {name}, 0)"
_KEY_LOCK = "hashtextextended('laterite:key:' || {name}, 0)"
_DELETE = f"{DELETE_FINISHED} RETURNING 1"

# FIRST's params: ids, tokens (finished). It sets the claim's SETTINGS (sql_postgres) for
# the rest of the transaction.
_FIRST = f"WITH done AS ({_DELETE}) SELECT (SELECT count(*) FROM done), {SETTINGS}"

# Params: queues, SCAN, candidates, limit. The candidates: per queue, the first
# `candidates` waiting jobs without a key or whose key has room (by this snapshot:
# only to spare locking a full key; CLAIM counts again), among its first SCAN. Their
# keys are locked one by one in the order of their first job, until `limit` keys are.
_KEYS = (
    f"WITH running AS (SELECT concurrency_key AS key, count(*) AS n FROM {TABLE} "
    f"WHERE token IS NOT NULL AND concurrency_key IS NOT NULL GROUP BY concurrency_key), "
    f"cand AS (SELECT q.ord, j.* FROM unnest(%s::varchar[]) WITH ORDINALITY AS q(name, ord) "
    f"CROSS JOIN LATERAL (SELECT priority, available_at, id, key FROM ("
    f"SELECT priority, available_at, id, concurrency_key AS key, concurrency_limit AS lim "
    f"FROM {TABLE} WHERE queue = q.name AND token IS NULL AND available_at <= {NOW} "
    f"ORDER BY priority DESC, available_at, id LIMIT %s) s "
    f"WHERE key IS NULL OR lim > COALESCE((SELECT n FROM running WHERE running.key = s.key), 0) "
    f"ORDER BY priority DESC, available_at, id LIMIT %s) j), "
    # Materialized: the lock below is tried on its rows one by one, in their order, and
    # stops at `limit` keys (a condition on a plain subquery may be pushed down into
    # it, and then tried on every key).
    f"firsts AS MATERIALIZED (SELECT key FROM (SELECT DISTINCT ON (key) key, ord, priority, "
    f"available_at, id FROM cand WHERE key IS NOT NULL "
    f"ORDER BY key, ord, priority DESC, available_at, id) f "
    f"ORDER BY ord, priority DESC, available_at, id), "
    f"locked AS (SELECT key FROM firsts "
    f"WHERE pg_try_advisory_xact_lock({_KEY_LOCK.format(name='key')}) LIMIT %s) "
    f"SELECT set_config('{KEYS_SETTING}', "
    f"(SELECT COALESCE(array_agg(key), '{{}}') FROM locked)::text, true), "
    f"set_config('{IDS_SETTING}', (SELECT COALESCE(array_agg(id ORDER BY ord, priority DESC, "
    f"available_at, id), '{{}}') FROM cand)::text, true)"
)

# Params: limited queue names. Blocking, taken in one order (of their ids) by every
# claim, this one's and the queue-only one's (sql_queue_limits_postgres), so two claims
# never wait for each other in a circle (the key locks of KEYS never wait). Taken after
# KEYS, so that while a claim holds a queue's lock the server only runs CLAIM and the
# commit.
QUEUE_LOCK_IDS = (
    f"(SELECT DISTINCT {_QUEUE_LOCK.format(name='name')} AS id "
    f"FROM unnest(%s::varchar[]) AS l(name) ORDER BY id) ids"
)
_QUEUES = f"SELECT count(pg_advisory_xact_lock(id)) FROM {QUEUE_LOCK_IDS}"

# Params: queues, concurrency, rate, period (arrays, NULL for none), NO_LIMIT,
# NO_LIMIT, candidates, limit, token, worker. Times are the server's (sql_postgres.NOW).
_CLAIM = (
    f"WITH keys AS MATERIALIZED (SELECT current_setting('{KEYS_SETTING}')::varchar[] AS keys, "
    f"current_setting('{IDS_SETTING}')::bigint[] AS ids), "
    f"q AS (SELECT * FROM unnest(%s::varchar[], %s::int[], %s::int[], %s::float8[]) "
    f"WITH ORDINALITY AS q(name, conc, rate, period, ord)), "
    # The starts past their period go (under the queue's lock: one claim at a time).
    f"pruned AS (DELETE FROM {STARTS} s USING q WHERE s.queue = q.name AND q.rate IS NOT NULL "
    f"AND s.started_at <= {NOW} - make_interval(secs => q.period) RETURNING 1), "
    # Materialized: each count runs once per claim, and only for a queue with that limit.
    f"room AS MATERIALIZED (SELECT q.name, q.ord, LEAST("
    f"CASE WHEN q.conc IS NULL THEN %s ELSE q.conc - (SELECT count(*) FROM {TABLE} r "
    f"WHERE r.queue = q.name AND r.token IS NOT NULL) END, "
    f"CASE WHEN q.rate IS NULL THEN %s ELSE q.rate - (SELECT count(*) FROM {STARTS} s "
    f"WHERE s.queue = q.name AND s.started_at > {NOW} "
    f"- make_interval(secs => q.period)) END) AS room "
    f"FROM q), "
    # The running jobs of the locked keys (the partial index of claimed keyed jobs).
    f"running AS (SELECT concurrency_key AS key, count(*) AS n FROM {TABLE} "
    f"WHERE token IS NOT NULL AND concurrency_key = ANY((SELECT keys FROM keys)::varchar[]) "
    f"GROUP BY concurrency_key), "
    # The candidates of KEYS still waiting, in their order, each locked as it is taken.
    # Each is found by its id alone, whatever the table's statistics say (`token IS
    # NULL` written so that the partial index of waiting jobs cannot serve it: a plan
    # made while the table was near empty scanned it all for each id). Rows another
    # claim holds are skipped: the jobs of a key or of a limited queue only its lock
    # holder takes, but a job with neither any claim may take.
    f"cand AS (SELECT room.ord, j.* FROM room CROSS JOIN LATERAL (SELECT t.* "
    f"FROM unnest((SELECT ids FROM keys)::bigint[]) AS c(id) CROSS JOIN LATERAL ("
    f"SELECT ctid, id, priority, available_at, concurrency_key, concurrency_limit "
    f"FROM {TABLE} WHERE id = c.id AND queue = room.name AND COALESCE(token, '') = '' "
    f"AND (concurrency_key IS NULL OR concurrency_key = ANY((SELECT keys FROM keys)::varchar[])) "
    f"FOR UPDATE SKIP LOCKED) t LIMIT LEAST(room.room, %s)) j WHERE room.room > 0), "
    f"ranked AS (SELECT cand.*, row_number() OVER (PARTITION BY concurrency_key "
    f"ORDER BY ord, priority DESC, available_at, id) AS nth, "
    f"COALESCE(running.n, 0) AS running FROM cand "
    f"LEFT JOIN running ON running.key = cand.concurrency_key), "
    f"picked AS (SELECT ctid, id, "
    f"row_number() OVER (ORDER BY ord, priority DESC, available_at, id) - 1 AS position "
    f"FROM ranked "
    f"WHERE concurrency_key IS NULL OR nth <= concurrency_limit - running "
    f"ORDER BY ord, priority DESC, available_at, id LIMIT %s), "
    f"claimed AS (UPDATE {TABLE} SET token = %s, claimed_at = {NOW}, "
    f"claimed_by = %s || {WAKES_QUIET}, "
    f"attempts = attempts + 1, claim_position = picked.position FROM picked "
    # By the row's address: it is locked, so it stays where it is; found by a
    # TID scan, not a read of the whole table (sql_postgres.CLAIM_UPDATE).
    f"WHERE {TABLE}.ctid = ANY(ARRAY(SELECT ctid FROM picked)) "
    f"AND {TABLE}.ctid = picked.ctid AND {TABLE}.id = picked.id AND {TABLE}.token IS NULL "
    f"RETURNING {', '.join(f'{TABLE}.{c}' for c in COLUMNS)}), "
    f"started AS (INSERT INTO {STARTS} (queue, started_at) SELECT c.queue, {NOW} FROM claimed c "
    f"JOIN q ON q.name = c.queue WHERE q.rate IS NOT NULL RETURNING 1) "
    f"SELECT {', '.join(COLUMNS)} FROM claimed "
    f"WHERE (SELECT count(*) FROM started) + (SELECT count(*) FROM pruned) >= 0"
)


def statements(
    finished: Sequence[Claim], token: str, worker: str, queues: Sequence[str],
    limit: int, limits: dict[str, QueueLimit], candidates: int,
) -> list[tuple[str, list[Any]]]:
    """FIRST, KEYS, QUEUES and CLAIM with their parameters, to run in this order in one
    transaction."""
    plain = [limits.get(q, QueueLimit()) for q in queues]
    first = [[c.id for c in finished], [c.token for c in finished]]
    keys = [list(queues), SCAN, candidates, limit]
    claim = [
        list(queues), [lim.concurrency for lim in plain], [lim.rate for lim in plain],
        [lim.period for lim in plain], NO_LIMIT, NO_LIMIT, candidates, limit, token, worker,
    ]
    return [(_FIRST, first), (_KEYS, keys), (_QUEUES, [sorted(limits)]), (_CLAIM, claim)]


def locked_keys(results: Sequence[Sequence[Sequence[Any]]]) -> bool:
    """Whether KEYS locked any key, from the rows of the statements."""
    return results[1][0][0] != "{}"
