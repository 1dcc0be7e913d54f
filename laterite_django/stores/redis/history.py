"""The Redis store's job history: records kept in the database's JobRecord table, as the
failed list is, so that the admin and `queue_history` read one table for every store.

A finished job's record is appended to the list `P:history` by lua/record_finished.lua,
sent in the same round trip as the job's deletion (the script just before it, reading
the job's hash while the claim is still held): no round trip of its own. The workers
move the list to the database in bulk (`move_history`: at every sweep, when idle and
as they stop), so the database sees one INSERT per chunk, never one per job. A job
that failed for good or was cancelled gets its record in the transaction that writes
its failed row.

A move reads the list's first records, writes those whose job has no record yet (a
worker that died after its INSERT, before taking them off, left them there), then takes
them off if the list still starts with exactly them (lua/history_taken.lua): two workers
moving at once write each record once and take it off once.

queue_rekey re-encrypts the listed records in place, by their position counted from the
first record ever listed (`listed`, `reseal`: lua/history_listed.lua,
history_reseal.lua), while workers move them: a record re-encrypted after a move read it
makes that move leave its records listed, and the next move, finding their jobs written,
sets the written row's encrypted arguments to the listed record's (`_mend`). So a record
is written once, and the table ends with the newest key's ciphertext. The pruning is the
database's (`database.history.HistoryPruning`).
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from django.db import DatabaseError, DataError, IntegrityError, transaction

from ...core.history import SUCCEEDED, attempt_entry, attempt_error, full_log, status_of
from ...core.values import Claim
from ..database.history import insert_rows, record_model, record_of
from ..recording import history, recorded
from .values import dt, text

if TYPE_CHECKING:
    from redis import Redis

__all__ = ["MOVE_CHUNK", "HistoryEntries"]

logger = logging.getLogger("laterite")

# Records moved to the database per INSERT.
MOVE_CHUNK = 1000


class HistoryEntries:
    """A Redis store's part of the job history (see the module docstring): the records
    listed with the settles, moved to the database, and those of jobs that failed."""

    def __init__(self, database: str, prefix: str, client: Callable[[], Redis],
                 run: Callable[[str, Sequence[Any]], Any]) -> None:
        self.database = database
        self.prefix = prefix
        self._client = client  # the store's client, connected on first use
        self._run = run  # runs a script (lua/<name>.lua) with the prefix
        self.pending = False  # this process listed records not moved yet
        self._loaded = False  # record_finished.lua was run once here

    def record_step(self, finished: Sequence[Claim]) -> tuple[str, list[Any]] | None:
        """The call of record_finished.lua for the jobs of `finished` whose queue keeps
        history, to run just before their deletion; None if none does."""
        policy = history()
        if policy is None:
            return None
        keep = recorded(policy, finished)
        if not keep:
            return None
        if not self._loaded:
            # Loaded now, not in the settle's pipeline: a script Redis did not know runs
            # after the others there, once the jobs are gone (scripts.finish).
            self._run("record_finished", [])
            self._loaded = True
        self.pending = True
        return "record_finished", [value for c in keep for value in (
            c.id, c.token, repr(c.started) if c.started else "",
            repr(c.ended) if c.ended else "")]

    def move(self, limit: int = MOVE_CHUNK) -> int:
        """Move up to `limit` records from Redis to the database; return how many were
        written there."""
        key = f"{self.prefix}:history"
        raw = self._client().lrange(key, 0, limit - 1)
        if not raw:
            self.pending = False
            return 0
        rows = [_row(entry) for entry in raw]
        ids = [row["job_id"] for row in rows]
        # A job is its id and push time: ids start again on a Redis that lost its data.
        have = {(job_id, pushed_at): sealed for job_id, pushed_at, sealed in (
            record_model()._default_manager.using(self.database)
            .filter(job_id__in=ids).values_list("job_id", "pushed_at", "encrypted"))}
        fresh: dict[tuple, dict[str, Any]] = {}
        for row in rows:
            job = (row["job_id"], row["pushed_at"])
            if job not in have:
                fresh.setdefault(job, row)  # one record per job
            elif row["encrypted"] is not None and row["encrypted"] != have[job]:
                self._mend(row)
        try:
            with transaction.atomic(using=self.database):
                insert_rows(list(fresh.values()), self.database)
        except (DataError, IntegrityError):
            # One record the table refuses: the others one by one, that one logged and
            # left out (taken off with them), so it never stops every move after it.
            for row in fresh.values():
                try:
                    with transaction.atomic(using=self.database):
                        insert_rows([row], self.database)
                except (DataError, IntegrityError) as e:
                    logger.warning("The history record of job #%s could not be written "
                                   "(%s); left out", row["job_id"], e,
                                   extra={"action": "history_not_written"})
        self._run("history_taken", [len(raw), _digest(raw)])
        return len(fresh)

    def _mend(self, row: dict[str, Any]) -> None:
        """Set the encrypted arguments of the written record of `row`'s job to `row`'s:
        queue_rekey re-encrypted the listed record after a move had read it, and that
        move wrote it under the older key (see the module docstring)."""
        (record_model()._default_manager.using(self.database)
         .filter(job_id=row["job_id"], pushed_at=row["pushed_at"])
         .update(encrypted=row["encrypted"]))

    def listed(self, after: int, limit: int) -> list[tuple[int, str]]:
        """(position, payload) of up to `limit` listed records after position `after`,
        by position; "" for a record that does not read (queue_rekey)."""
        found = self._run("history_listed", [after, limit])
        if not found:
            return []
        first, raw = found
        return [(position, _payload(entry))
                for position, entry in enumerate(raw, int(text(first)))]

    def reseal(self, changes: Sequence[tuple[int, str, str]]) -> int:
        """Set the payload of each listed record (position, old, new) still listed there
        and still holding `old`; return how many were set (queue_rekey)."""
        if not changes:
            return 0
        return int(self._run("history_reseal", [value for change in changes
                                                for value in change]))

    def sample(self, limit: int) -> list[str]:
        """The payloads of the first `limit` listed records (the check of retired keys)."""
        return [_payload(entry) for entry in
                self._client().lrange(f"{self.prefix}:history", 0, limit - 1)]

    def move_now(self, every: bool = False) -> None:
        """Move what this process appended (or, with `every`, anything listed: the
        records of workers that died), a chunk at a time."""
        if history() is None or not (every or self.pending):
            return
        try:
            while self.move() >= MOVE_CHUNK:
                pass
        except Exception as e:  # the database or Redis away: the records wait in Redis
            logger.warning("Could not move the job history's records to the database (%s); "
                           "they wait in Redis for the next move", e,
                           extra={"action": "history_not_moved"})

    def attempt_step(self, claim: Claim, error: str) -> str:
        """The attempt release.lua adds to the attempt log of `claim`'s job (retried after
        failing with `error`): JSON of its start, end and error; "" if its queue keeps
        no history (the script then reads and writes nothing more)."""
        policy = history()
        if policy is None or not policy.records(claim.queue):
            return ""
        return json.dumps({"started": claim.started or None,
                           "ended": claim.ended or time.time(),
                           "error": attempt_error(error)})

    def abandoned_args(self) -> list[str]:
        """The arguments requeue_abandoned.lua takes after its reason: which queues keep
        history, whose jobs get the attempt whose worker died in their log ('' none,
        'all' but the queues named, 'only' those named)."""
        policy = history()
        if policy is None:
            return [""]
        every, named = policy.recorded_queues()
        return ["all" if every else "only", *named]

    def worker_of(self, claim: Claim) -> tuple[str, str] | None:
        """The worker holding `claim` (its job's `claimed_by`) and its job's attempt log
        (JSON text, "" if none), read for the record of a job that fails for good; None
        if its queue keeps no history (nothing read)."""
        policy = history()
        if policy is None or not policy.records(claim.queue):
            return None
        worker, log = self._client().hmget(f"{self.prefix}:job:{claim.id}", "claimed_by",
                                           "attempt_log")
        return (text(worker) if worker is not None else "",
                text(log) if log is not None else "")

    def record_failed(self, claim: Claim, error: str, status: str, worker: str,
                      earlier: str = "") -> None:
        """Write the record of a job failed for good or cancelled while it ran, once it
        left Redis (fail()); `earlier`: its attempt log as the job's hash held it."""
        started = datetime.fromtimestamp(claim.started, UTC) if claim.started else None
        ended = claim.ended or time.time()
        log = full_log(earlier, attempt_entry(claim.attempts, claim.started, ended, worker,
                                              error))
        self.write_records([record_of(claim.id, claim.name, claim.queue, claim.payload,
                                      claim.attempts, claim.pushed_at, started,
                                      datetime.now(UTC), worker, status, error, log)])

    def record_cancelled(self, failed: Sequence[dict[str, Any]]) -> None:
        """Write the records of waiting jobs cancelled (their failed rows' fields), in the
        transaction that writes those rows."""
        policy = history()
        if policy is None:
            return
        kept = [f for f in failed if policy.records(f["queue"])]
        logs = self._logs([f["job_id"] for f in kept])
        self.write_records([record_of(f["job_id"], f["name"], f["queue"], f["payload"],
                                      f["attempts"], f["pushed_at"], None, f["failed_at"],
                                      "", status_of(f["error"]), f["error"],
                                      full_log(logs.get(f["job_id"]), None))
                            for f in kept])

    def _logs(self, ids: Sequence[int]) -> dict[int, str]:
        """The attempt logs (JSON text) the hashes of jobs `ids` keep, those with one."""
        if not ids:
            return {}
        pipe = self._client().pipeline(transaction=False)
        for job_id in ids:
            pipe.hget(f"{self.prefix}:job:{job_id}", "attempt_log")
        return {job_id: text(log) for job_id, log in zip(ids, pipe.execute(), strict=True)
                if log is not None}

    def write_records(self, rows: Sequence[dict[str, Any]]) -> None:
        """Write records of jobs that left for the failed list, in a savepoint: one that
        cannot be written is logged and left out, never undoing the failure or cancel."""
        try:
            with transaction.atomic(using=self.database):
                insert_rows(rows, self.database)
        except DatabaseError as e:
            logger.warning("History records of jobs %s could not be written (%s)",
                           [row["job_id"] for row in rows], e,
                           extra={"action": "history_not_written"})


def _row(entry: bytes | str) -> dict[str, Any]:
    """The JobRecord fields of a record as record_finished.lua lists it (one listed
    before attempt logs were kept has no tenth value)."""
    values = json.loads(text(entry))
    (job_id, name, queue, payload, attempts, pushed_at, worker, started,
     ended) = values[:9]
    earlier = values[9] if len(values) > 9 else ""
    finished = _moment(ended) or datetime.now(UTC)
    log = full_log(earlier, attempt_entry(int(attempts or 0), float(started or 0),
                                          finished.timestamp(), worker, ""))
    return record_of(int(job_id), name, queue, payload, int(attempts or 0),
                     dt(pushed_at) if pushed_at else None,
                     _moment(started), finished, worker, SUCCEEDED, "", log)


def _payload(entry: bytes | str) -> str:
    """The payload of a listed record; "" if the record does not read."""
    try:
        found = json.loads(text(entry))[3]
    except (ValueError, LookupError, TypeError):
        return ""
    return found if isinstance(found, str) else ""


def _digest(raw: Sequence[bytes | str]) -> str:
    """The SHA-1 of listed records joined by newlines, as history_taken.lua makes it."""
    joined = b"\n".join(entry.encode() if isinstance(entry, str) else entry for entry in raw)
    return hashlib.sha1(joined, usedforsecurity=False).hexdigest()


def _moment(seconds: str) -> datetime | None:
    return datetime.fromtimestamp(float(seconds), UTC) if seconds else None
