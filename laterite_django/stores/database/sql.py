"""The SQL of the database store that reads the same on PostgreSQL and SQLite.

What differs between the two (push, claim, delete, make_due) lives in
`postgres.py` and `sqlite.py`; both build on the names here.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, overload

from django.utils import timezone
from django.utils.dateparse import parse_datetime

from ...core.values import Claim, NewJob

__all__ = [
    "ADD_MINUTE",
    "ADD_TO_BATCH",
    "ALL_SETTLED",
    "BATCH_CAUGHT",
    "BATCH_FINISHED",
    "BUSY",
    "CHANNEL",
    "CHECKPOINT",
    "CLAIM_LOCK",
    "CLEAR",
    "CLEAR_BATCHED",
    "CLEAR_QUEUE",
    "CLEAR_QUEUE_BATCHED",
    "COLUMNS",
    "COUNTED_QUEUES",
    "COUNTS",
    "COUNT_BATCH",
    "DELETE_BATCH_ENDS",
    "FAILED_TABLE",
    "FAIL_DELETE",
    "FAIL_INSERT",
    "IDLE_LOCK",
    "INSERT_COLUMNS",
    "KEEP_KEY",
    "MINUTES",
    "MINUTE_TABLE",
    "NO_LIMIT",
    "OLDEST_WAITING",
    "PAUSE",
    "PAUSED_QUEUES",
    "PAUSED_TABLE",
    "PING",
    "PRUNE_MINUTES",
    "PUSH_LOCK",
    "QUIET_LOCK",
    "REQUEUE_SET",
    "ROW",
    "RUNNING",
    "SAVE_CHECKPOINT",
    "SAVE_PROGRESS",
    "SET_CONCURRENCY_KEY",
    "STARTS",
    "TABLE",
    "WAITING_OF_BATCH",
    "abandoned",
    "aware",
    "cancel_delete",
    "cancel_mark",
    "cancel_requested",
    "candidates",
    "capped_counts",
    "claim_from_row",
    "delete_jobs",
    "drop_batch_delete",
    "execute",
    "heartbeat",
    "next_due",
    "release",
    "resume",
    "returning",
    "settled",
    "stored_fair_key",
    "without_key",
]

TABLE = "laterite_job"
FAILED_TABLE = "laterite_failed_job"
# The PostgreSQL NOTIFY channel that wakes idle workers.
CHANNEL = "laterite"
# The advisory locks of PostgreSQL's wake-ups (see postgres.py, wait.py): idle
# workers hold IDLE_LOCK ("laterite" in ASCII), shared, while they wait; pushes hold
# PUSH_LOCK, shared, until their commit. Quiet workers hold QUIET_LOCK, shared; claims
# that take jobs hold CLAIM_LOCK, shared, until their commit (see postgres.py).
IDLE_LOCK = 7809651207897183333
PUSH_LOCK = IDLE_LOCK + 1
QUIET_LOCK = IDLE_LOCK + 2
CLAIM_LOCK = IDLE_LOCK + 3

# What a claim returns, in the order DatabaseStore reads it.
COLUMNS = (
    "id", "name", "queue", "payload", "attempts", "pushed_at", "token", "retry_until",
    "unique_key", "priority", "last_error", "available_at", "claim_position", "uncounted",
    "cancel_requested_at",
)
INSERT_COLUMNS = (
    "name, queue, payload, priority, pushed_at, available_at, attempts, retry_until, "
    "unique_key, claimed_by, last_error, claim_position"
)
# One pushed row: name, queue, payload, priority, pushed_at, available_at,
# retry_until, unique_key.
ROW = "(%s, %s, %s, %s, %s, %s, 0, %s, %s, '', '', 0)"


def stored_fair_key(job: NewJob) -> str | None:
    """The `fair_key` column of a pushed job: its fair key, "" for a job of a fair queue
    pushed without one (they share a turn), NULL for a job of a queue not served fairly."""
    return None if job.fair_cost is None else (job.fair_key or "")

# A released or requeued job keeps its unique key unless another job with that
# key now waits (the key is unique among waiting jobs only).
KEEP_KEY = (
    f"CASE WHEN unique_key IS NOT NULL AND EXISTS (SELECT 1 FROM {TABLE} other "
    f"WHERE other.unique_key = {TABLE}.unique_key AND other.token IS NULL) "
    f"THEN NULL ELSE unique_key END"
)

# Params: reason. A claim at position 0 started, so it is charged a try;
# a later one may never have started, so it is not (`uncounted`), though it stays
# counted in `attempts`: if it did start, its next run has a new attempt number.
# The job keeps its available_at, so it is first in line when claimed again.
REQUEUE_SET = (
    f"UPDATE {TABLE} SET token = NULL, claimed_at = NULL, claimed_by = '', last_error = %s, "
    f"uncounted = CASE WHEN claim_position > 0 THEN uncounted + 1 ELSE uncounted END, "
    f"claim_position = 0, unique_key = {KEEP_KEY} "
)

# Params: id, token. Then FAIL_INSERT with the returned row, failed_at, error. A
# retried job's link to the failed job it came from goes on to its new failed row.
FAIL_DELETE = (
    f"DELETE FROM {TABLE} WHERE id = %s AND token = %s "
    f"RETURNING id, name, queue, payload, priority, unique_key, attempts, pushed_at, "
    f"retried_from_id, retried_from_error"
)
FAIL_INSERT = (
    f"INSERT INTO {FAILED_TABLE} (job_id, name, queue, payload, priority, "
    f"unique_key, attempts, pushed_at, retried_from_id, retried_from_error, failed_at, error) "
    f"VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s) RETURNING id"
)

# Params: now, now. Per queue: waiting (due), delayed, running.
COUNTS = (
    f"SELECT queue, "
    f"SUM(CASE WHEN token IS NULL AND available_at <= %s THEN 1 ELSE 0 END), "
    f"SUM(CASE WHEN token IS NULL AND available_at > %s THEN 1 ELSE 0 END), "
    f"SUM(CASE WHEN token IS NOT NULL THEN 1 ELSE 0 END) "
    f"FROM {TABLE} GROUP BY queue"
)
# Counts that stop at a cap, for a big table (the admin's summary): each reads at most
# its cap of entries of an index (laterite_job_due), whatever the table holds.
# The queues with jobs not claimed, jumping from queue to queue through laterite_job_due.
COUNTED_QUEUES = (
    f"WITH RECURSIVE queues(queue) AS ("
    f"SELECT MIN(queue) FROM {TABLE} WHERE token IS NULL "
    f"UNION ALL SELECT (SELECT MIN(queue) FROM {TABLE} WHERE token IS NULL "
    f"AND queue > queues.queue) FROM queues WHERE queues.queue IS NOT NULL"
    f") SELECT queue FROM queues WHERE queue IS NOT NULL"
)


def capped_counts(queues: int) -> str:
    """Per queue of `queues` (given as parameters; the planner then knows how many, and
    a query it thinks small is not compiled first), waiting and delayed counted up to
    a cap; then the running jobs of every queue, read up to a cap, per queue.

    Params: now, cap + 1, now, cap + 1, then each queue (none of these without
    queues); then cap + 1."""
    names = " UNION ALL ".join(["SELECT %s AS queue"] * queues)
    capped = (
        f"SELECT names.queue, "
        f"(SELECT COUNT(*) FROM (SELECT 1 FROM {TABLE} j WHERE j.queue = names.queue "
        f"AND j.token IS NULL AND j.available_at <= %s LIMIT %s) w), "
        f"(SELECT COUNT(*) FROM (SELECT 1 FROM {TABLE} j WHERE j.queue = names.queue "
        f"AND j.token IS NULL AND j.available_at > %s LIMIT %s) d), 0 "
        f"FROM ({names}) names UNION ALL "
    ) if queues else ""
    return (
        f"{capped}SELECT running.queue, 0, 0, COUNT(*) FROM (SELECT queue FROM {TABLE} "
        f"WHERE token IS NOT NULL LIMIT %s) running GROUP BY running.queue"
    )


MINUTE_TABLE = "laterite_minute_count"
# Params: queue, minute, succeeded, failed (Store.add_minutes; PostgreSQL and SQLite alike).
ADD_MINUTE = (
    f"INSERT INTO {MINUTE_TABLE} (queue, minute, succeeded, failed) VALUES (%s, %s, %s, %s) "
    f"ON CONFLICT (queue, minute) DO UPDATE SET "
    f"succeeded = {MINUTE_TABLE}.succeeded + excluded.succeeded, "
    f"failed = {MINUTE_TABLE}.failed + excluded.failed"
)
# Params: the oldest minute to keep.
PRUNE_MINUTES = f"DELETE FROM {MINUTE_TABLE} WHERE minute < %s"
# Params: since.
MINUTES = (
    f"SELECT queue, minute, succeeded, failed, latency FROM {MINUTE_TABLE} "
    f"WHERE minute >= %s ORDER BY minute, queue"
)
# Params: minute. Whether a worker sampled the queues' latency in it (Store.sample_latency).
LATENCY_SAMPLED = (
    f"SELECT 1 FROM {MINUTE_TABLE} WHERE minute = %s AND latency IS NOT NULL LIMIT 1")
# Params: queue, minute, latency. The minute's first sample is kept.
SAMPLE_LATENCY = (
    f"INSERT INTO {MINUTE_TABLE} (queue, minute, succeeded, failed, latency) "
    f"VALUES (%s, %s, 0, 0, %s) ON CONFLICT (queue, minute) DO UPDATE SET "
    f"latency = excluded.latency WHERE {MINUTE_TABLE}.latency IS NULL"
)
# Params: progress text, id, token (Store.save_progress).
SAVE_PROGRESS = f"UPDATE {TABLE} SET progress = %s WHERE id = %s AND token = %s"
# Params: id (Store.checkpoint).
CHECKPOINT = f"SELECT checkpoint FROM {TABLE} WHERE id = %s"
# Params: checkpoint text, id, token (Store.save_checkpoint).
SAVE_CHECKPOINT = f"UPDATE {TABLE} SET checkpoint = %s WHERE id = %s AND token = %s"
# Params: limit. The running jobs (Store.running).
RUNNING = (
    f"SELECT id, name, queue, attempts, claimed_by, progress, token FROM {TABLE} "
    f"WHERE token IS NOT NULL ORDER BY id LIMIT %s"
)
# Params: now. Each queue's oldest due, unclaimed job (Store.oldest_waiting).
OLDEST_WAITING = (
    f"SELECT queue, MIN(available_at) FROM {TABLE} "
    f"WHERE token IS NULL AND available_at <= %s GROUP BY queue"
)
CLEAR = f"DELETE FROM {TABLE}"
# Params: concurrency key, concurrency limit, id (a pushed job's, in its push's transaction).
SET_CONCURRENCY_KEY = (
    f"UPDATE {TABLE} SET concurrency_key = %s, concurrency_limit = %s WHERE id = %s")
# The paused queues (Store.pause).
PAUSED_TABLE = "laterite_paused_queue"
CLEAR_QUEUE = f"DELETE FROM {TABLE} WHERE queue = %s"
# Params: queue, now (Store.pause).
PAUSE = (f"INSERT INTO {PAUSED_TABLE} (queue, paused_at) VALUES (%s, %s) "
         f"ON CONFLICT (queue) DO NOTHING")
PAUSED_QUEUES = f"SELECT queue FROM {PAUSED_TABLE}"
# Params: '%"batch":[%', then CLEAR_QUEUE's queue for the second. The jobs of batches
# that a clear deletes, their payloads returned to count them on their batches
# (DatabaseStore._clear); CLEAR or CLEAR_QUEUE then deletes the others.
CLEAR_BATCHED = f"DELETE FROM {TABLE} WHERE payload LIKE %s RETURNING payload"
CLEAR_QUEUE_BATCHED = f"DELETE FROM {TABLE} WHERE payload LIKE %s AND queue = %s RETURNING payload"
# Params: a batch's payload pattern (workflows.batch_pattern). Its waiting jobs, with
# their payloads (Store.drop_batch: each dialect's DROP_BATCH_FIND).
WAITING_OF_BATCH = f"SELECT id, payload FROM {TABLE} WHERE token IS NULL AND payload LIKE %s"
# Whether a sweep would find work: a claimed job (its worker may die), or a batch
# counted down to 0 whose callbacks wait (workflows.finish_settled). An idle
# worker asks it once before it goes quiet (wait.py). The first claimed job in
# the order of laterite_job_claimed, not EXISTS: whatever the statistics say, one step
# into that index beats sorting the whole table. As EXISTS, a planner that believed
# most jobs claimed (statistics from mid-drain, or from an empty table) read the table
# until it met one, every page of a backlog nobody had claimed.
BUSY = (
    f"SELECT (SELECT 1 FROM {TABLE} WHERE token IS NOT NULL ORDER BY claimed_at LIMIT 1) "
    f"IS NOT NULL "
    f"OR EXISTS (SELECT 1 FROM laterite_batch WHERE pending <= 0 AND finished_at IS NULL)"
)
# The starts of jobs of queues with a rate limit (LATERITE_QUEUE_LIMITS).
STARTS = "laterite_flow_start"
# Room that stands for "no limit".
NO_LIMIT = 1_000_000
# Candidates a limited claim looks at per queue (the jobs of keys at their limit are
# skipped by the scan itself, so these are only for several jobs of one key in one
# claim): CANDIDATES_PER_JOB for each job claimed, at least CANDIDATES_MIN, at most
# CANDIDATES.
CANDIDATES = 200
CANDIDATES_PER_JOB = 4
CANDIDATES_MIN = 50

# -- batches (workflows.py) ---------------------------------------------------

# Params: calls added (twice), batch id. The batch's new total, unless it has finished
# or was cancelled (workflows.add_to_batch).
ADD_TO_BATCH = (
    "UPDATE laterite_batch SET total = total + %s, pending = pending + %s "
    "WHERE id = %s AND finished_at IS NULL AND cancelled_at IS NULL RETURNING total"
)
# Params: ended, failed, batch id. The batch's counts moved, unless it has finished
# (workflows._count); returns what finished_jobs reads.
COUNT_BATCH = (
    "UPDATE laterite_batch SET pending = pending - %s, failed = failed + %s "
    "WHERE id = %s AND finished_at IS NULL "
    "RETURNING pending, failed, allow_failures, caught_at, cancelled_at, "
    "then_call, catch_call, finally_call"
)
# Params: batch id. Its counted ends, let go once it has finished.
DELETE_BATCH_ENDS = "DELETE FROM laterite_batch_end WHERE batch_id = %s"
# Params: now, batch id (workflows.finished_jobs).
BATCH_CAUGHT = "UPDATE laterite_batch SET caught_at = %s WHERE id = %s"
BATCH_FINISHED = "UPDATE laterite_batch SET finished_at = %s WHERE id = %s"
# Every batch counted down to 0 whose callbacks are not pushed yet (the sweep's
# workflows.finish_settled).
ALL_SETTLED = (
    "SELECT id FROM laterite_batch WHERE pending <= 0 AND finished_at IS NULL"
)

# Reaches the server and the table (so a database never migrated says so).
PING = f"SELECT 1 FROM {TABLE} WHERE 1 = 0"


def candidates(limit: int) -> int:
    """How many waiting jobs a limited claim of up to `limit` jobs looks at per queue."""
    return min(CANDIDATES, max(CANDIDATES_MIN, CANDIDATES_PER_JOB * limit))


def returning(table: str = TABLE) -> str:
    """The RETURNING list of a claim, qualified by `table`."""
    return "RETURNING " + ", ".join(f"{table}.{column}" for column in COLUMNS)


def release(uncharged: bool, started: bool = True, due: str = "%s",
            checkpoint: bool = False, logged: str = "") -> str:
    """Params: due's (available_at), error, the checkpoint text if `checkpoint`, those of
    `logged` if given, id, token. Back to the queue, first of its batch, due at `due`
    (SQL); `uncharged`, `started`, `checkpoint`: see Store.release. `logged`: the SQL of
    the job's `attempt_log` with this attempt added (history.append_attempt), read from
    the row as it was (its attempts, claimed_by)."""
    counts = "" if not uncharged else (
        "uncounted = uncounted + 1, " if started else "attempts = attempts - 1, ")
    kept = "checkpoint = %s, " if checkpoint else ""
    log = f"attempt_log = {logged}, " if logged else ""
    return (
        f"UPDATE {TABLE} SET token = NULL, claimed_at = NULL, claimed_by = '', "
        f"{counts}claim_position = 0, available_at = {due}, last_error = %s, {kept}{log}"
        f"unique_key = {KEEP_KEY} WHERE id = %s AND token = %s"
    )


def next_due(queues: int) -> str:
    """When the next unclaimed job of `queues` queues is due (Store.next_due).

    Idle workers ask it at every wake-up, so its cost must not grow with the jobs
    waiting: it steps through the claim's index (queue, priority, available_at)
    from one priority to the next (a loose index scan) and takes the earliest job
    of each, a few index probes per queue where MIN(available_at) would read
    every waiting job.
    """
    values = ", ".join(["(%s)"] * queues)
    return (
        f"WITH RECURSIVE queues(qname) AS (VALUES {values}), "
        f"levels(queue, priority) AS ("
        f"SELECT qname, (SELECT j.priority FROM {TABLE} j WHERE j.queue = queues.qname "
        f"AND j.token IS NULL ORDER BY j.priority DESC LIMIT 1) FROM queues "
        f"UNION ALL SELECT levels.queue, (SELECT j.priority FROM {TABLE} j "
        f"WHERE j.queue = levels.queue AND j.token IS NULL AND j.priority < levels.priority "
        f"ORDER BY j.priority DESC LIMIT 1) FROM levels WHERE levels.priority IS NOT NULL) "
        f"SELECT MIN((SELECT j.available_at FROM {TABLE} j WHERE j.queue = levels.queue "
        f"AND j.token IS NULL AND j.priority = levels.priority "
        f"ORDER BY j.priority DESC, j.available_at LIMIT 1)) "
        f"FROM levels WHERE levels.priority IS NOT NULL"
    )


def abandoned(cutoff: str) -> str:
    """The claims last refreshed before `cutoff`: an SQL expression of the database's
    own clock (the dialect's NOW, less retry_after), the clock that dated the claims and
    their heartbeats. A worker's clock never decides it: a host whose clock ran ahead
    would take live claims for abandoned."""
    return f"token IS NOT NULL AND claimed_at < {cutoff}"


def heartbeat(ids: int, tokens: int, now: str) -> str:
    """Params: `ids` job ids, then `tokens` claim tokens; `now`: the database's clock,
    an SQL expression (the dialect's NOW).

    The jobs are found by id (the primary key): by token alone no index leads to
    them, and PostgreSQL read the whole table at every heartbeat."""
    id_marks = ", ".join(["%s"] * ids)
    token_marks = ", ".join(["%s"] * tokens)
    return (f"UPDATE {TABLE} SET claimed_at = {now} "
            f"WHERE id IN ({id_marks}) AND token IN ({token_marks})")


def _marks(count: int) -> str:
    return ", ".join(["%s"] * count)


def resume(queues: int) -> str:
    """Params: `queues` queue names. Their pauses lifted (Store.resume)."""
    return f"DELETE FROM {PAUSED_TABLE} WHERE queue IN ({_marks(queues)})"


def cancel_mark(ids: int) -> str:
    """Params: now, then `ids` job ids. The cancel asked of each job, waiting or running;
    returns the ids found (Store.cancel)."""
    return (f"UPDATE {TABLE} SET cancel_requested_at = %s WHERE id IN ({_marks(ids)}) "
            f"RETURNING id")


def cancel_delete(ids: int) -> str:
    """Params: `ids` job ids. The waiting ones deleted, each returned as FAIL_DELETE
    returns a job, for FAIL_INSERT (Store.cancel)."""
    return (
        f"DELETE FROM {TABLE} WHERE token IS NULL AND id IN ({_marks(ids)}) "
        f"RETURNING id, name, queue, payload, priority, unique_key, attempts, pushed_at, "
        f"retried_from_id, retried_from_error"
    )


def cancel_requested(claims: int) -> str:
    """Params: id and token of each of `claims` claims. The ids of those asked to cancel
    (Store.cancel_requested)."""
    pairs = " OR ".join(["(id = %s AND token = %s)"] * claims)
    return f"SELECT id FROM {TABLE} WHERE cancel_requested_at IS NOT NULL AND ({pairs})"


def drop_batch_delete(ids: int) -> str:
    """Params: `ids` job ids. Those still waiting deleted, with their payloads
    (Store.drop_batch)."""
    return (f"DELETE FROM {TABLE} WHERE id IN ({_marks(ids)}) AND token IS NULL "
            f"RETURNING id, payload")


def delete_jobs(ids: int) -> str:
    """Params: `ids` job ids. Deleted, waiting or running, with their payloads
    (workflows.delete_jobs, the admin's Delete)."""
    return f"DELETE FROM {TABLE} WHERE id IN ({_marks(ids)}) RETURNING payload"


def settled(batches: int, lock: bool) -> str:
    """Params: `batches` batch ids. Those counted down to 0 whose callbacks are not pushed
    yet, locked if `lock` (FOR UPDATE): a second transaction finishing the same batch
    waits, then finds it finished (workflows.finish_settled)."""
    return (
        "SELECT id, pending, failed, allow_failures, caught_at, cancelled_at, then_call, "
        f"catch_call, finally_call FROM laterite_batch WHERE id IN ({_marks(batches)}) "
        f"AND pending <= 0 AND finished_at IS NULL ORDER BY id{' FOR UPDATE' if lock else ''}"
    )


def without_key(sql: str) -> str:
    """The statement, dropping the unique key instead of keeping it (after a race)."""
    return sql.replace(KEEP_KEY, "NULL")


def execute(
    connection: Any, statement: str, params: Sequence[Any], fetch: bool = False
) -> tuple[list, int]:
    """Run one statement through Django's cursor on `connection`; return (rows, rowcount)."""
    with connection.cursor() as cursor:
        cursor.execute(statement, params)
        return (cursor.fetchall() if fetch else []), cursor.rowcount


@overload
def aware(value: None) -> None: ...
@overload
def aware(value: datetime | str) -> datetime: ...
def aware(value: datetime | str | None) -> datetime | None:
    """Return a stored timestamp as an aware datetime (SQLite hands back text)."""
    if value is None:
        return None
    if isinstance(value, str):
        value = parse_datetime(value)
    if value is not None and timezone.is_naive(value):
        value = value.replace(tzinfo=UTC)
    return value


def claim_from_row(row: Sequence) -> Claim:
    """A claim from a row of `COLUMNS` (the claims' and the recorded settles' RETURNING)."""
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
