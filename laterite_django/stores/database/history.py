"""The job history's table (`laterite_job_record`, models.JobRecord) on the database:
the statements that write records in the transaction that settles their jobs, and the
pruning.

Writing: a finished job's record is made from its row as the settle deletes it, by
the server, in the same statement (PostgreSQL's plain settle: a data-modifying CTE)
or the same transaction (an INSERT ... SELECT just before the deletion), never in a
round trip of its own. The worker sends only what the row does not hold: which of its
jobs to record (their queues keep history) and when each started and ended, by its
clock (epoch seconds).

Pruning: on PostgreSQL the table is partitioned by day on `finished_at` (the
migration's DDL below); `keep_partitions` creates the next days' partitions ahead and
drops those of days wholly past every queue's keep, which leaves no dead rows (a
DROP, not a DELETE). The default partition takes any row no day's partition would (a
clock far off, the partitions not made yet), so an insert never fails; rows there,
and those of queues kept shorter than the longest keep, are deleted by their index.
On SQLite, a DELETE by the index on `finished_at`.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Sequence
from datetime import UTC, date, datetime, timedelta
from operator import attrgetter
from typing import Any

from django.apps import apps
from django.db import DatabaseError, connections, transaction
from django.db.models import Q

from ...core.ending import any_marked
from ...core.history import (
    KEEP_FIRST,
    KEEP_LAST,
    SUCCEEDED,
    HistoryPolicy,
    attempt_error,
    status_of,
)
from ...core.values import Claim
from ...payload import SEALED_KEY
from ..recording import history
from . import postgres as pg
from .sql import TABLE, aware, claim_from_row

__all__ = [
    "AHEAD_DAYS",
    "COLUMNS",
    "POSTGRES_DDL",
    "PRUNE_EVERY",
    "RECORD_TABLE",
    "SCAN",
    "HistoryPruning",
    "abandoned_logged",
    "append_attempt",
    "argument_filter",
    "attempt_logged",
    "delete_recorded",
    "insert_finished",
    "insert_rows",
    "keep_partitions",
    "kept_logs",
    "partition_name",
    "partitions",
    "plain",
    "prune",
    "prune_history",
    "record_cancelled",
    "record_failed",
    "record_model",
    "record_of",
    "record_times",
    "search",
    "settle_and_claim_recorded",
]

logger = logging.getLogger("laterite")

RECORD_TABLE = "laterite_job_record"
# Days of partitions made ahead of today (the workers' housekeeping and queue_history
# --prune make them; a day not made yet goes to the default partition meanwhile).
AHEAD_DAYS = 3
COLUMNS = ("job_id, name, queue, args, kwargs, encrypted, status, attempts, pushed_at, "
           "started_at, finished_at, worker, error, attempt_log")

# The partitioned table on PostgreSQL as migration 0024 made it (`RunPython`, by vendor);
# later columns are added to it by later migrations (0025: attempt_log), as to any table.
POSTGRES_DDL = [
    f"CREATE TABLE {RECORD_TABLE} ("
    "id bigserial NOT NULL, job_id bigint NOT NULL, name varchar(200) NOT NULL, "
    "queue varchar(100) NOT NULL, args jsonb NULL, kwargs jsonb NULL, encrypted jsonb NULL, "
    "status varchar(10) NOT NULL, attempts integer NOT NULL, pushed_at timestamptz NULL, "
    "started_at timestamptz NULL, finished_at timestamptz NOT NULL, "
    "worker varchar(200) NOT NULL, error text NOT NULL, "
    "PRIMARY KEY (id, finished_at)) PARTITION BY RANGE (finished_at)",
    f"CREATE TABLE {RECORD_TABLE}_default PARTITION OF {RECORD_TABLE} DEFAULT",
    f"CREATE INDEX laterite_record_finished ON {RECORD_TABLE} (finished_at)",
    f"CREATE INDEX laterite_record_name ON {RECORD_TABLE} (name, finished_at)",
    f"CREATE INDEX laterite_record_queue ON {RECORD_TABLE} (queue, finished_at)",
    f"CREATE INDEX laterite_record_job ON {RECORD_TABLE} (job_id)",
]

# -- attempt logs ---------------------------------------------------------------------
# A job retried while its queue keeps history keeps each failed attempt in its row's
# `attempt_log` (a JSON list of {attempt, started, ended, worker, error}), appended by
# the UPDATE that settles the retry and cut there to the first KEEP_FIRST and last
# KEEP_LAST; its record takes that list with its last attempt added, in the statement
# that writes it. Nothing of it is read or written while history is off, nor for a job
# that ran once (its record's attempt_log stays NULL: its columns say it all).

_CAP = KEEP_FIRST + KEEP_LAST


def append_attempt(postgres: bool) -> str:
    """The SQL of a job row's attempt_log with one attempt added, for the SET of the
    UPDATE that releases it (its number and worker read from the row as it was:
    attempts, claimed_by), the oldest of the last ones dropped past the cap. Params:
    started, ended (epoch seconds, or None), error."""
    if postgres:
        return (
            f"(SELECT CASE WHEN jsonb_array_length(l) > {_CAP} THEN l - {KEEP_FIRST} "
            f"ELSE l END FROM (SELECT COALESCE(attempt_log, '[]'::jsonb) || "
            f"jsonb_build_array(jsonb_build_object('attempt', attempts, 'started', "
            f"%s::float8, 'ended', %s::float8, 'worker', claimed_by, 'error', %s::text)) "
            f"AS l) added)"
        )
    return (
        f"(SELECT CASE WHEN json_array_length(l) > {_CAP} THEN "
        f"json_remove(l, '$[{KEEP_FIRST}]') ELSE l END FROM (SELECT "
        f"json_insert(COALESCE(attempt_log, '[]'), '$[#]', json_object('attempt', attempts, "
        f"'started', %s, 'ended', %s, 'worker', claimed_by, 'error', %s)) AS l))"
    )


def attempt_logged(postgres: bool, claim: Claim, error: str) -> tuple[str, list[Any]]:
    """For the release of `claim` (its attempt failed with `error`, to be retried): the
    SQL and params of its row's attempt_log with this attempt added, or ("", []) if its
    queue keeps no history (one lookup while history is off)."""
    policy = history()
    if policy is None or not policy.records(claim.queue):
        return "", []
    return append_attempt(postgres), [_epoch(claim.started), claim.ended or time.time(),
                                      attempt_error(error)]


def abandoned_logged(postgres: bool, statement: str, params: list[Any], reason: str
                     ) -> tuple[str, list[Any]]:
    """The sweep's requeue of abandoned claims (`statement`, `params`: the dialect's,
    `reason` its first param) made to add the attempt whose worker died to the log of
    each job of a queue keeping history: its number and worker from the row, no start
    nor end (not known), `reason` as its error. Only a claim at the head of its batch
    (it started; one behind may never have) is an attempt. As it was while history is
    off."""
    policy = history()
    if policy is None:
        return statement, params
    every, named = policy.recorded_queues()
    marks = ", ".join(["%s"] * len(named))
    if every:
        test = f" AND queue NOT IN ({marks})" if named else ""
    else:
        test = f" AND queue IN ({marks})"
    clause = (f"attempt_log = CASE WHEN claim_position = 0{test} THEN "
              f"{append_attempt(postgres)} ELSE attempt_log END, ")
    head = "last_error = %s, "  # REQUEUE_SET's: its param is the first, `reason`
    return (statement.replace(head, head + clause),
            [params[0], *named, None, None, attempt_error(reason), *params[1:]])


def _last_attempt(postgres: bool, j: str, started: str, ended: str, error: str) -> str:
    """The SQL of a record's attempt_log from its job's row `j`: NULL if the row kept
    none, else the row's list with the last attempt (`started`, `ended`, `error`: SQL)."""
    if postgres:
        return (f"CASE WHEN {j}.attempt_log IS NULL THEN NULL ELSE {j}.attempt_log || "
                f"jsonb_build_array(jsonb_build_object('attempt', {j}.attempts, 'started', "
                f"{started}, 'ended', {ended}, 'worker', {j}.claimed_by, 'error', {error})) "
                f"END")
    return (f"CASE WHEN {j}.attempt_log IS NULL THEN NULL ELSE json_insert({j}.attempt_log, "
            f"'$[#]', json_object('attempt', {j}.attempts, 'started', {started}, 'ended', "
            f"{ended}, 'worker', {j}.claimed_by, 'error', {error})) END")


# -- PostgreSQL -------------------------------------------------------------------

# A finished job's payload `j.payload` as jsonb, `p.j`: NULL (its arguments not kept)
# for one holding the escape of a NUL character, valid JSON that jsonb refuses; a record
# must never fail its job's settle. (A payload that is no JSON at all never ran, and its
# failure is recorded from Python: record_failed.)
_PG_PAYLOAD = (r"SELECT CASE WHEN strpos(j.payload, '\u0000') = 0 THEN j.payload::jsonb END "
               r"AS j")
# The record columns of a finished job's row `j` (its payload parsed once, as `p.j`)
# and its times `r` (epoch seconds, the worker's clock).
_PG_VALUES = (
    "j.id, j.name, j.queue, p.j->'args', p.j->'kwargs', p.j->'encrypted', %s, j.attempts, "
    "j.pushed_at, to_timestamp(r.started), to_timestamp(r.finished), j.claimed_by, %s, "
    + _last_attempt(True, "j", "r.started", "r.finished", "%s::text")
)
# Params: status, error, the error as the attempt log keeps it, then record_times' ids,
# tokens, started, finished. The records of
# the held claims among them, read from their rows (run before their deletion, in its
# transaction).
PG_INSERT_FINISHED = (
    f"INSERT INTO {RECORD_TABLE} ({COLUMNS}) SELECT {_PG_VALUES} "
    f"FROM unnest(%s::bigint[], %s::varchar[], %s::float8[], %s::float8[]) "
    f"AS r(id, token, started, finished) "
    f"JOIN {TABLE} j ON j.id = r.id AND j.token = r.token "
    f"CROSS JOIN LATERAL ({_PG_PAYLOAD}) p"
)


_NO_ERROR = "''"  # the SQL of a succeeded attempt's error


def pg_recorded(delete: str) -> str:
    """`delete` (a DELETE of finished jobs, as a CTE `done`'s body, without RETURNING)
    made to write the records of those of its rows listed in a second array of ids,
    in the same statement. Params: the DELETE's, then the record ids, started and
    finished times (epoch seconds); the CTE keeps the name `done`."""
    return (
        f"WITH gone AS ({delete} RETURNING {TABLE}.id, {TABLE}.name, {TABLE}.queue, "
        f"{TABLE}.payload, {TABLE}.attempts, {TABLE}.pushed_at, {TABLE}.claimed_by, "
        f"{TABLE}.attempt_log), "
        f"done AS (INSERT INTO {RECORD_TABLE} ({COLUMNS}) SELECT j.id, j.name, j.queue, "
        f"p.j->'args', p.j->'kwargs', p.j->'encrypted', '{SUCCEEDED}', j.attempts, "
        f"j.pushed_at, to_timestamp(r.started), to_timestamp(r.finished), j.claimed_by, '', "
        f"{_last_attempt(True, 'j', 'r.started', 'r.finished', _NO_ERROR)} "
        f"FROM gone j JOIN unnest(%s::bigint[], %s::float8[], %s::float8[]) "
        f"AS r(id, started, finished) ON r.id = j.id "
        f"CROSS JOIN LATERAL ({_PG_PAYLOAD}) p RETURNING 1)"
    )


# -- SQLite -----------------------------------------------------------------------


def _sqlite_insert(count: int) -> str:
    """Params: (id, token, started, finished, and the last two as epoch seconds) of
    `count` claims, then status, error, the error as the attempt log keeps it."""
    values = ", ".join(["(%s, %s, %s, %s, %s, %s)"] * count)
    return (
        f"INSERT INTO {RECORD_TABLE} ({COLUMNS}) SELECT j.id, j.name, j.queue, "
        f"json_extract(j.payload, '$.args'), json_extract(j.payload, '$.kwargs'), "
        f"json_extract(j.payload, '$.encrypted'), s.status, j.attempts, j.pushed_at, "
        f"r.column3, r.column4, j.claimed_by, s.error, "
        f"{_last_attempt(False, 'j', 'r.column5', 'r.column6', 's.logged')} "
        f"FROM (VALUES {values}) r JOIN {TABLE} j ON j.id = r.column1 AND j.token = r.column2 "
        f"CROSS JOIN (SELECT %s AS status, %s AS error, %s AS logged) s"
    )


# -- both ---------------------------------------------------------------------------


def _epoch(value: float) -> float | None:
    return value or None


def record_times(claims: Sequence[Claim]) -> tuple[list[int], list[str], list, list]:
    """ids, tokens, started and finished (epoch seconds) of `claims`: a start not known
    None, an end not known now (a job settled by another than its worker's hand)."""
    now = time.time()
    return ([c.id for c in claims], [c.token for c in claims],
            [_epoch(c.started) for c in claims], [c.ended or now for c in claims])


def _stamp(value: float, ts: Any) -> Any:
    return None if not value else ts(datetime.fromtimestamp(value, UTC))


def insert_finished(postgres: bool, claims: Sequence[Claim], status: str, error: str,
                    ts: Any) -> tuple[str, list[Any]]:
    """The INSERT ... SELECT writing the records of `claims` (held) from their rows, to
    run before their deletion in its transaction; `ts` adapts a datetime (SQLite)."""
    logged = attempt_error(error)
    if postgres:
        ids, tokens, started, finished = record_times(claims)
        return PG_INSERT_FINISHED, [status, error, logged, ids, tokens, started, finished]
    now = time.time()
    return (_sqlite_insert(len(claims)),
            [*[v for c in claims for v in (c.id, c.token, _stamp(c.started, ts),
                                           _stamp(c.ended or now, ts), _epoch(c.started),
                                           c.ended or now)],
             status, error, logged])


def record_model() -> Any:
    """The JobRecord model, by name: the stores are imported before the apps are loaded,
    so they cannot import the models at module level."""
    return apps.get_model("laterite_django", "JobRecord")


def insert_rows(rows: Sequence[dict[str, Any]], database: str) -> None:
    """Write records given whole (the Redis store's, cancelled jobs') by the ORM."""
    if rows:
        model = record_model()
        model._default_manager.using(database).bulk_create([model(**row) for row in rows])


# -- pruning ------------------------------------------------------------------------


def partition_name(day: date) -> str:
    return f"{RECORD_TABLE}_p{day:%Y%m%d}"


def partitions(cursor: Any) -> list[str]:
    """The names of the day partitions of the table (not the default one)."""
    cursor.execute(
        "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
        "JOIN pg_class p ON p.oid = i.inhparent WHERE p.relname = %s", [RECORD_TABLE])
    prefix = f"{RECORD_TABLE}_p"
    return sorted(name for (name,) in cursor.fetchall() if name.startswith(prefix))


def keep_partitions(cursor: Any, now: datetime, longest: float | None
                    ) -> tuple[list[str], list[str]]:
    """Make the partitions of today and the AHEAD_DAYS next days, drop those of days
    ended more than `longest` seconds before `now`; return (made, dropped).

    A day already holding rows in the default partition is not made (PostgreSQL would
    refuse it): those rows stay there, deleted by `prune` in time."""
    made: list[str] = []
    dropped: list[str] = []
    have = set(partitions(cursor))
    today = now.astimezone(UTC).date()
    for ahead in range(AHEAD_DAYS + 1):
        day = today + timedelta(days=ahead)
        name = partition_name(day)
        if name in have:
            continue
        start = datetime(day.year, day.month, day.day, tzinfo=UTC)
        end = start + timedelta(days=1)
        cursor.execute(f"SELECT 1 FROM {RECORD_TABLE}_default WHERE finished_at >= %s "
                       f"AND finished_at < %s LIMIT 1", [start, end])
        if cursor.fetchone():
            continue
        # Literals: DDL takes no parameters (the bounds are dates made here).
        cursor.execute(f"CREATE TABLE IF NOT EXISTS {name} PARTITION OF {RECORD_TABLE} "
                       f"FOR VALUES FROM ('{start.isoformat()}') TO ('{end.isoformat()}')")
        made.append(name)
    if longest is None:
        return made, dropped
    cutoff = now - timedelta(seconds=longest)
    prefix = len(f"{RECORD_TABLE}_p")
    for name in sorted(have):
        day = datetime.strptime(name[prefix:], "%Y%m%d").replace(tzinfo=UTC)
        if day + timedelta(days=1) <= cutoff:
            cursor.execute(f"DROP TABLE IF EXISTS {name}")
            dropped.append(name)
    return made, dropped


def prune(cursor: Any, postgres: bool, policy: HistoryPolicy, now: datetime, ts: Any
          ) -> tuple[int, list[str], list[str]]:
    """Remove the records past their queue's keep; return (rows deleted, partitions
    made, partitions dropped). PostgreSQL: whole days dropped, the default partition and
    the queues kept shorter deleted by index; SQLite: a DELETE by the index."""
    made: list[str] = []
    dropped: list[str] = []
    deleted = 0
    cutoff = now - timedelta(seconds=policy.longest)
    if postgres:
        made, dropped = keep_partitions(cursor, now, policy.longest)
        cursor.execute(f"DELETE FROM {RECORD_TABLE}_default WHERE finished_at < %s", [cutoff])
    else:
        cursor.execute(f"DELETE FROM {RECORD_TABLE} WHERE finished_at < %s", [ts(cutoff)])
    deleted += max(cursor.rowcount, 0)
    for queue, keep in policy.shorter().items():
        cursor.execute(f"DELETE FROM {RECORD_TABLE} WHERE queue = %s AND finished_at < %s",
                       [queue, ts(now - timedelta(seconds=keep))])
        deleted += max(cursor.rowcount, 0)
    return deleted, made, dropped


def prune_history(database: str, now: datetime | None = None
                  ) -> tuple[int, list[str], list[str]]:
    """Prune the history on `database` under the policy in force (make the partitions
    ahead on PostgreSQL too); (0, [], []) while history is off. `queue_history --prune`
    and the workers' housekeeping (Store.tidy, every PRUNE_EVERY s) call it."""
    policy = history()
    if policy is None:
        return 0, [], []
    connection = connections[database]
    postgres = connection.vendor == "postgresql"
    with transaction.atomic(using=database), connection.cursor() as cursor:
        if postgres:
            # Two workers at once would race to make the same partition: one at a time.
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [PRUNE_LOCK])
            # Making or dropping a partition locks the whole table for an instant; queued
            # behind a long reader, it would hold every settle's record behind it. It
            # gives up instead, for the next prune.
            cursor.execute("SET LOCAL lock_timeout = '2s'")
        return prune(cursor, postgres, policy, now or datetime.now(UTC),
                     connection.ops.adapt_datetimefield_value)


# Seconds between two prunes by one process's housekeeping (Store.tidy).
PRUNE_EVERY = 300.0
# The advisory lock a prune holds on PostgreSQL ("laterite" in ASCII, + 9).
PRUNE_LOCK = 7809651207897183333 + 9


class HistoryPruning:
    """A store's pruning of the history at its workers' housekeeping (Store.tidy): at
    most once per PRUNE_EVERY s per process, a lock not had in time left to the next."""

    def __init__(self, database: str) -> None:
        self.database = database
        self.pruned_at = 0.0  # monotonic time of this store's last prune

    def maybe(self) -> int:
        """Prune the history if this process last did PRUNE_EVERY s ago; rows deleted."""
        now = time.monotonic()
        if now - self.pruned_at < PRUNE_EVERY or history() is None:
            return 0
        self.pruned_at = now
        try:
            return prune_history(self.database)[0]
        except DatabaseError as e:  # a lock not had in time: the next prune does it
            logger.warning("The job history was not pruned (%s); the next prune will",
                           e, extra={"action": "history_not_pruned"})
            return 0


def settle_and_claim_recorded(connection: Any, record: Sequence[Claim],
                              finished: Sequence[Claim], queues: Sequence[str],
                              worker: str, limit: int) -> list[Claim] | None:
    """PostgreSQL's plain settle and claim of `finished` (plain jobs, no limit applying),
    writing the records of `record` in its one statement; the claims made, by position,
    or None inside a transaction (the caller then writes them in its transaction)."""
    rows = _run_recorded(connection, _SETTLE_AND_CLAIM_RECORDED, finished, record,
                         pg.claim_params(uuid.uuid4().hex, worker,
                                         list(dict.fromkeys(queues)), limit))
    if rows is None:
        return None
    claims = [claim_from_row(row) for row in rows]
    claims.sort(key=attrgetter("position"))
    return claims


def delete_recorded(connection: Any, record: Sequence[Claim], claims: Sequence[Claim]
                    ) -> int | None:
    """PostgreSQL's plain deletion of `claims`, writing the records of `record` in its one
    statement; how many were deleted, or None inside a transaction (as above)."""
    rows = _run_recorded(connection, _DELETE_RECORDED, claims, record, [])
    return None if rows is None else len(rows)


def record_failed(execute: Any, ts: Any, postgres: bool, database: str, claim: Claim,
                  error: str) -> None:
    """Write the record of `claim`, failing or cancelled with `error`, from its row (in
    fail()'s transaction, before the row goes; `execute` and `ts` the store's); nothing
    if its queue keeps none.

    Its arguments are read here, not by the database: a payload that is no JSON fails
    this way. A record that cannot be written is logged and left out, in a savepoint
    of its own: it never keeps the job from the failed list."""
    policy = history()
    if policy is None or not policy.records(claim.queue):
        return
    fields = record_of(claim.id, claim.name, claim.queue, claim.payload, 0, None,
                       None, datetime.now(UTC), "", "", "")
    started = _stamp(claim.started, ts)
    end = claim.ended or time.time()
    ended = ts(datetime.fromtimestamp(end, UTC))
    cast = "::jsonb" if postgres else ""
    values = [_json(fields[name]) for name in ("args", "kwargs", "encrypted")]
    last = (_last_attempt(True, "j", "%s::float8", "%s::float8", "%s::text") if postgres
            else _last_attempt(False, "j", "%s", "%s", "%s"))
    try:
        with transaction.atomic(using=database):
            execute(
                f"INSERT INTO {RECORD_TABLE} ({COLUMNS}) SELECT j.id, j.name, j.queue, "
                f"%s{cast}, %s{cast}, %s{cast}, %s, j.attempts, j.pushed_at, %s, %s, "
                f"j.claimed_by, %s, {last} FROM {TABLE} j WHERE j.id = %s AND j.token = %s",
                [*values, status_of(error), started, ended, error, _epoch(claim.started),
                 end, attempt_error(error), claim.id, claim.token])
    except DatabaseError as e:
        logger.warning("Job %s #%s: its history record could not be written (%s)",
                       claim.name, claim.id, e, extra={"action": "history_not_written"})


def kept_logs(execute: Any, ids: Sequence[int]) -> dict[int, list[Any]]:
    """The attempt logs the job table keeps for `ids` (those with one), read before a
    cancel deletes them, for their records; nothing read while history is off."""
    if history() is None or not ids:
        return {}
    rows, _ = execute(f"SELECT id, attempt_log FROM {TABLE} WHERE attempt_log IS NOT NULL "
                      f"AND id IN ({', '.join(['%s'] * len(ids))})", list(ids), fetch=True)
    found = {}
    for job_id, log in rows:
        if isinstance(log, str | bytes):
            log = json.loads(log)
        if isinstance(log, list) and log:
            found[job_id] = log
    return found


def record_cancelled(database: str, rows: Sequence[Sequence[Any]], error: str,
                     logs: dict[int, list[Any]] | None = None) -> None:
    """Write the records of waiting jobs cancelled (rows as sql.FAIL_DELETE returns), with
    the attempts their rows kept (`logs`, by job id: kept_logs)."""
    policy = history()
    if policy is None or not rows:
        return
    now = datetime.now(UTC)
    logs = logs or {}
    insert_rows([record_of(row[0], row[1], row[2], row[3], row[6], aware(row[7]), None,
                           now, "", status_of(error), error, logs.get(row[0]))
                 for row in rows if policy.records(row[2])], database)


def plain(claims: Sequence[Claim]) -> bool:
    """Whether `claims` are of plain jobs (their payload holds their arguments first: of
    no chain, batch or sequence, whose settles do more than delete them)."""
    return all(c.payload.startswith('{"args"') for c in claims) and not any_marked(claims)


def _json(value: Any) -> str | None:
    """A JSON column's value as text for a placeholder (None: NULL)."""
    return None if value is None else json.dumps(value)


def record_of(job_id: int, name: str, queue: str, payload: str, attempts: int,
              pushed_at: datetime | None, started: datetime | None, finished: datetime,
              worker: str, status: str, error: str,
              attempt_log: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """The JobRecord fields of a finished job, its arguments read from its payload as
    stored (encrypted ones stay "[encrypted]", their ciphertext under `encrypted`)."""
    try:
        data = json.loads(payload)
    except ValueError:
        data = {}
    if not isinstance(data, dict) or "\\u0000" in payload:  # (jsonb refuses a NUL)
        data = {}
    # Cut to the columns (a Redis job's name or queue is not bounded by them).
    name, queue, worker = name[:200], queue[:100], worker[:200]
    return {"job_id": job_id, "name": name, "queue": queue, "args": data.get("args"),
            "kwargs": data.get("kwargs"), "encrypted": data.get(SEALED_KEY),
            "status": status, "attempts": attempts, "pushed_at": pushed_at,
            "started_at": started, "finished_at": finished, "worker": worker,
            "error": error, "attempt_log": attempt_log}


def _run_recorded(connection: Any, statement: Any, finished: Sequence[Claim],
                  record: Sequence[Claim], after: list[Any]) -> list[tuple] | None:
    """Run a recorded settle (`statement`: params the deletion's, the records', `after`)
    under the claim's settings, as postgres.run_claim does; None inside a transaction."""
    ids, _, started, ended = record_times(record)
    params = [[c.id for c in finished], [c.token for c in finished], ids, started, ended,
              *after]
    return pg._under_settings(connection, statement, params)


# PostgreSQL's recorded settles, by name (see pg_recorded): the plain settle and claim,
# and the plain deletion, each one statement that writes the records of its rows.
_SETTLE_AND_CLAIM_RECORDED = pg.Prepared(
    b"laterite_settle_and_claim_recorded",
    f"{pg_recorded(pg.DELETE)}, {pg.PICKED} {pg.CLAIM_UPDATE}", None)
_DELETE_RECORDED = pg.Prepared(
    b"laterite_delete_recorded", f"{pg_recorded(pg.DELETE)} SELECT id FROM gone", None)


# -- search (queue_history, the admin) ------------------------------------------------

# Rows an argument filter looks through at most, newest first (queue_history --scan).
SCAN = 100_000


def argument_filter(postgres: bool, key: str, value: Any) -> Any:
    """The Q of records whose argument `key` (a keyword, or a position: digits) is
    `value`: on PostgreSQL a jsonb containment (kwargs @> {key: value}), elsewhere the
    key's value (json_extract)."""
    if key.isdigit():
        return Q(**{f"args__{int(key)}": value})
    if postgres:
        return Q(kwargs__contains={key: value})
    return Q(**{f"kwargs__{key}": value})


def search(database: str, *, name: str | None = None, queue: str | None = None,
           status: str | None = None, arguments: Sequence[tuple[str, Any]] = (),
           since: datetime | None = None, until: datetime | None = None,
           limit: int = 100, scan: int = SCAN) -> tuple[list[Any], bool]:
    """The records that match, newest first, at most `limit`; and whether an argument
    filter stopped at `scan` rows (older ones were not looked at).

    Name, queue and time go by the table's indexes ((name, finished_at), (queue,
    finished_at), finished_at; on PostgreSQL only the partitions of the days asked for
    are read). An argument filter is a test of each row, so it looks only through the
    `scan` newest rows that the other filters keep: bounded whatever the table holds.
    """
    rows = record_model()._default_manager.using(database)
    if name:
        rows = rows.filter(name=name)
    if queue:
        rows = rows.filter(queue=queue)
    if status:
        rows = rows.filter(status=status)
    if since is not None:
        rows = rows.filter(finished_at__gte=since)
    if until is not None:
        rows = rows.filter(finished_at__lt=until)
    rows = rows.order_by("-finished_at", "-id")
    if not arguments:
        return list(rows[:limit]), False
    postgres = connections[database].vendor == "postgresql"
    found = record_model()._default_manager.using(database).filter(
        id__in=rows.values("id")[:scan])
    for key, value in arguments:
        found = found.filter(argument_filter(postgres, key, value))
    full = rows[scan - 1 : scan].exists()  # the window held `scan` rows: maybe more
    return list(found.order_by("-finished_at", "-id")[:limit]), full
