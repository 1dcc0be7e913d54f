"""Jobs kept in the `Job` table through the Django connection (PostgreSQL or SQLite).

The claim and push path speaks SQL on the connection Django already holds: a claim is
one statement (`FOR UPDATE SKIP LOCKED` on PostgreSQL; SQLite takes its write lock
for the statement, so claims are serialized), finished jobs are deleted in the
same statement as the next claim, and no model is instantiated. On PostgreSQL
a push notifies the `laterite` channel, so idle workers wake at once; on SQLite
an idle worker watches the file's data_version (wait.py).

This module holds the flow, the same on both databases; the statements that differ
are in `postgres.py` and `sqlite.py` (the dialect), the shared ones in `sql.py`.

Words: an *idle* worker waits on LISTEN (PostgreSQL) or the file (SQLite); a *quiet*
one (Store.quiet) is idle and asks the database nothing until woken. A claim's
*token* says which claim holds (leases) a job. A job of a chain or batch carries a
workflow mark in its payload (workflows.marks): deleting it settles its end.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from operator import attrgetter
from types import ModuleType
from typing import Any

from django.db import IntegrityError, connections, transaction
from django.db.models import Q
from django.utils import timezone

from ...core.cancel import Outcome, reason
from ...core.checkpoint import CursorSender
from ...core.crash_points import crash_point
from ...core.ending import End, any_marked, ends_of, ends_of_payloads
from ...core.fairness import TOP_KEYS, WaitingByKey
from ...core.history import SUCCEEDED
from ...core.limits import Limits, QueueLimit
from ...core.marks import marks_of
from ...core.minutes import KEEP, Minute, minute_start
from ...core.progress import Progress
from ...core.sequences import MARK, HeldSequence, any_sequenced, sequence_of
from ...core.values import Claim, NewJob, QueueCounts, Running, job_ids
from ...core.workers import WorkerInfo
from ..base import Store
from ..callbacks import limits_of, next_links
from ..errors import guarded
from ..recording import history, recorded
from ..schedule_state import REMOVED, Fired, ScheduleFire, ScheduleState
from . import postgres, sql, sqlite
from .cursors import PostgresCursorSender
from .fair import FairTurns, with_fair_places
from .fair_rows import FairRows
from .history import (
    HistoryPruning,
    abandoned_logged,
    attempt_logged,
    delete_recorded,
    insert_finished,
    kept_logs,
    plain,
    record_cancelled,
    record_failed,
    settle_and_claim_recorded,
)
from .postgres import keeps_callers_settings
from .sequences import Sequences
from .sql import aware, claim_from_row
from .vacuum import Vacuum
from .wait import Waiting
from .workers import WorkerRows
from .workflows import batch_ends, batch_pattern, count_ends, finish_settled, finished_jobs

__all__ = ["CHANNEL", "DatabaseStore"]

CHANNEL = sql.CHANNEL


def _schedule_state(row: Any) -> ScheduleState:
    return ScheduleState(name=row.name, last_tick=row.last_tick, fired_at=row.fired_at,
                         job_id=row.job_id, paused=row.paused,
                         rule_hash=row.rule_hash or None)


class DatabaseStore(Store):
    """The `database` store: PostgreSQL or SQLite, on LATERITE_QUEUE_DATABASE."""

    transactional_push = True

    def __init__(self, *, database: str = "default") -> None:
        super().__init__(database=database)
        self._waiting = Waiting(database, self.next_due)
        # Per thread: the idle worker's listener and locks (wait.py), callbacks pushed.
        self._local = self._waiting.local
        self._dialect: ModuleType | None = None
        self._vacuum = Vacuum()
        self._pruned_before: datetime | None = None  # add_minutes: old counts removed
        self._fair = FairRows(database, self._execute, self._ts)  # fair_rows.py
        self._workers = WorkerRows(database)  # the live workers' list (workers.py)
        self._history_pruning = HistoryPruning(database)  # history.py

    def __repr__(self) -> str:
        return f"<DatabaseStore database={self.database!r}>"

    # -- plumbing ---------------------------------------------------------------

    @property
    def connection(self):
        return connections[self.database]

    @property
    def postgres(self) -> bool:
        return self.connection.vendor == "postgresql"

    @property
    def dialect(self) -> ModuleType:
        """The module of statements for this database: `postgres` or `sqlite`."""
        if self._dialect is None:
            self._dialect = postgres if self.postgres else sqlite
        return self._dialect

    def _ts(self, value: datetime | None) -> Any:
        return None if value is None else self.connection.ops.adapt_datetimefield_value(value)

    def _execute(self, statement: str, params: Sequence[Any], fetch: bool = False
                 ) -> tuple[list, int]:
        """Run one statement on Django's connection; return (rows, rowcount)."""
        return sql.execute(self.connection, statement, params, fetch)

    def _execute_prepared(self, statement: str, params: Sequence[Any], fetch: bool = False
                          ) -> tuple[list, int]:
        """Run a statement of the claim and push path (prepared on PostgreSQL)."""
        return self.dialect.execute_prepared(self.connection, statement, params, fetch)

    def _run_all(self, statements: Sequence[tuple[str, list]]) -> list:
        """Run statements in one transaction (one commit); return the rows of all."""
        if len(statements) == 1:
            return self._execute_prepared(*statements[0], fetch=True)[0]
        rows: list = []
        with transaction.atomic(using=self.database):
            for statement, params in statements:
                rows += self._execute_prepared(statement, params, fetch=True)[0]
        return rows

    # -- push -------------------------------------------------------------------

    @guarded
    def push(self, jobs: Sequence[NewJob]) -> list[int | None]:
        if not jobs:
            return []
        if (len(jobs) == 1 and not jobs[0].concurrency_limit and jobs[0].fair_cost is None
                and not jobs[0].payload.startswith(MARK)):
            # The push most code makes: one statement, no bookkeeping of keys.
            dialect = self._dialect or self.dialect
            return [dialect.push_one(connections[self.database], jobs[0], self._ts)]
        if any_sequenced([job.payload for job in jobs]):
            # Jobs of a sequence: each the head of its key, or held behind it
            # (sequences.py), in one transaction with the key's row.
            with transaction.atomic(using=self.database):
                return self._sequences().placed(jobs, self._push_unsequenced)
        return self._push_unsequenced(jobs)

    def _push_unsequenced(self, jobs: Sequence[NewJob]) -> list[int | None]:
        """push's work once sequences are seen to (in their transaction, if any)."""
        if any(job.fair_cost is not None for job in jobs):
            # Jobs of a fair queue get their place in line (fair.py), in the same
            # transaction as the turns that give it.
            with transaction.atomic(using=self.database):
                turns = FairTurns(self._execute, self._ts,
                                  " FOR UPDATE" if self.postgres else "")
                jobs = with_fair_places(jobs, turns)
                turns.save()
                ids = self._push(jobs)
                self._set_concurrency_keys(jobs, ids)
            return ids
        if any(job.concurrency_limit for job in jobs):
            # Jobs with a concurrency limit carry its key, set in the same transaction,
            # so no worker sees them without it.
            with transaction.atomic(using=self.database):
                ids = self._push(jobs)
                self._set_concurrency_keys(jobs, ids)
            return ids
        return self._push(jobs)

    @guarded
    def push_debounced(self, job: NewJob) -> tuple[int, bool]:
        if self.postgres:
            # One upsert (postgres.PUSH_DEBOUNCED), in the caller's transaction if open.
            rows, _ = self._execute(*postgres.push_debounced(job), fetch=True)
            return int(rows[0][0]), bool(rows[0][1])
        replace, insert = sqlite.push_debounced(job, self._ts)
        # The UPDATE holds SQLite's write lock to the commit (see sqlite.REPLACE_DEBOUNCED).
        with transaction.atomic(using=self.database):
            rows, _ = self._execute(*replace, fetch=True)
            if rows:
                return int(rows[0][0]), True
            rows, _ = self._execute(*insert, fetch=True)
            return int(rows[0][0]), False

    def _push(self, jobs: Sequence[NewJob]) -> list[int | None]:
        # Within one batch the first job with a key wins, as if pushed one by one.
        seen: set[str] = set()
        keep: list[bool] = []
        for job in jobs:
            keep.append(job.unique_key is None or job.unique_key not in seen)
            if job.unique_key is not None:
                seen.add(job.unique_key)
        rows = [job for job, fresh in zip(jobs, keep, strict=True) if fresh]
        returned = [row[:2] for row in self._run_all(self.dialect.push(rows, self._ts))]
        # Ids follow the VALUES order; a keyed row missing from them was a duplicate
        # of a job already waiting.
        returned.sort()
        inserted_keys = {key for _, key in returned if key is not None}
        ids = iter(row_id for row_id, _ in returned)
        result: list[int | None] = []
        for job, fresh in zip(jobs, keep, strict=True):
            if fresh and (job.unique_key is None or job.unique_key in inserted_keys):
                result.append(next(ids))
            else:
                result.append(None)
        return result

    # -- claim --------------------------------------------------------------------

    @guarded
    def claim(self, queues: Sequence[str], worker: str, limit: int = 1,
              limits: Limits | None = None) -> list[Claim]:
        return self.settle_and_claim((), queues, worker, limit, limits)

    @guarded
    @keeps_callers_settings
    def settle_and_claim(
        self, finished: Sequence[Claim], queues: Sequence[str], worker: str, limit: int = 1,
        limits: Limits | None = None,
    ) -> list[Claim]:
        if finished and (policy := history()) is not None:  # job history kept
            return self._settle_recorded(recorded(policy, finished), finished, queues,
                                         worker, limit, limits)
        return self._settle_and_claim(finished, queues, worker, limit, limits)

    def _settle_recorded(self, record: Sequence[Claim], finished: Sequence[Claim],
                         queues: Sequence[str], worker: str, limit: int,
                         limits: Limits | None) -> list[Claim]:
        """settle_and_claim, writing the job history's records of `record` (of
        `finished`) with it: on PostgreSQL's plain claim in its one statement, else in
        its transaction (history.py)."""
        if not record:
            return self._settle_and_claim(finished, queues, worker, limit, limits)
        if not queues or limit < 1:  # nothing to claim (its queues paused): a deletion
            self._delete_recorded(record, finished)
            return []
        if self.dialect is postgres and plain(finished):
            if limits is None:
                limits = limits_of(list(dict.fromkeys(queues)))
            if not limits:
                claims = settle_and_claim_recorded(self.connection, record, finished,
                                                   queues, worker, limit)
                if claims is not None:
                    return claims
        with transaction.atomic(using=self.database):
            self._execute(*insert_finished(self.postgres, record, SUCCEEDED, "", self._ts))
            return self._settle_and_claim(finished, queues, worker, limit, limits)

    def _settle_and_claim(
        self, finished: Sequence[Claim], queues: Sequence[str], worker: str, limit: int,
        limits: Limits | None,
    ) -> list[Claim]:
        """settle_and_claim's work, also run inside the store's own transaction (a
        workflow's settle, _settle_and_claim_marked), where the claim's settings stay."""
        if not queues or limit < 1:
            self.delete(finished)
            return []
        if finished and any_sequenced([c.payload for c in finished]):
            # A head of a sequence ended: deleted with the promotion of the next job of
            # its key, in one transaction, before the claim (which may take that job).
            self._delete_sequenced(finished)
            finished = ()
        # A queue listed twice is read once. Read again in the same statement, its rows
        # (locked by that statement, so not skipped) would be picked twice.
        queues = list(dict.fromkeys(queues))
        if limits is None:
            limits = limits_of(queues)
        if finished and any_marked(finished):
            return self._settle_and_claim_marked(finished, queues, worker, limit, limits)
        if limits:
            # A limit may apply: the limited claim; else the plain one below.
            rows = self._claim_limited(finished, uuid.uuid4().hex, timezone.now(), worker,
                                       queues, limit, limits.queues, limits.keys)
            return sorted(map(claim_from_row, rows), key=attrgetter("position"))
        token = uuid.uuid4().hex
        dialect = self.dialect
        found: Sequence[Sequence[Any]] | None = None
        now = None  # PostgreSQL's clock dates its claims (postgres.NOW)
        if dialect is postgres:
            found = postgres.run_claim(self.connection, finished, token, worker,
                                           queues, limit)
        else:
            now = self._ts(timezone.now())
        if found is None:
            found = self._run_all(dialect.claim(finished, token, now, worker, queues, limit))
        claims = [claim_from_row(row) for row in found]
        claims.sort(key=attrgetter("position"))
        return claims

    # The limited claim: LATERITE_QUEUE_LIMITS and `@job(concurrency=...)` enforced inside
    # the claim itself (see core/limits.py for what the limits mean).
    #
    # The database store's limited claim: LATERITE_QUEUE_LIMITS and `@job(concurrency=...)`
    # enforced inside the claim itself (see core/limits.py for what the limits mean).
    #
    # Used only when a limit may apply to the claim (a limited queue among the worker's,
    # or a registered job with `concurrency`); otherwise the claim is the plain one of
    # postgres.py / sqlite.py, untouched.
    #
    # On PostgreSQL a worker whose process registers no job with `concurrency` makes the
    # queue-only claim (`postgres.queue_limited_claim`: two statements, concurrency keys not
    # looked at, as its plain claim does not look at them); any other, the keyed one
    # (`postgres.limited_claim`: four). Both take the same queue locks in the same order and
    # count alike, so the two may race.
    #
    # Why racing workers can never together exceed a limit:
    #
    # - PostgreSQL: each limited queue and each concurrency key has a transaction-level
    # advisory lock of its own. A claim takes jobs of a limited queue only while it
    # holds that queue's lock, and jobs of a key only while it holds that key's lock;
    # it counts (running jobs of the queue or key, the queue's recent starts) in a
    # statement whose snapshot is taken after those locks were granted (READ
    # COMMITTED: one snapshot per statement), and its own claims and starts commit
    # before the locks are let go (at its commit). So every claim that took jobs of
    # that queue or key before is committed and counted, and no other claim of it
    # runs meanwhile: the counts can only be too high (a job finished but not yet
    # deleted still counts as running), never too low. (The queue-only claim deletes
    # its worker's finished jobs in the counting statement, whose snapshot still sees
    # them running, and gives back exactly those it deleted: each was taken by that
    # worker's previous claim, committed before, so each is in the count.) Claims of
    # different queues and keys do not wait for each other. Queue locks are waited
    # for, in the order of their ids (no two claims wait for each other in a circle);
    # a key lock is only tried (`pg_try_advisory_xact_lock`): a key another claim
    # holds is skipped this time, its jobs keep waiting. A job of neither (an
    # unlimited queue, no key) needs no lock: `FOR UPDATE SKIP LOCKED` keeps two
    # claims from taking it both. The statements and the commit go in one round
    # trip, so a lock is held for the server's work alone.
    # - SQLite: one claim statement (after the deletion of finished jobs, in the same
    # transaction) reads and writes under the database's single write lock, so
    # claims are serialized by SQLite itself.
    #
    # In both, a job held back by a limit is simply not picked: it keeps waiting, no
    # attempt is counted, and the claim takes the other jobs allowed (the jobs of a
    # key at its limit are skipped, not waited behind; on PostgreSQL among the first 1000
    # waiting jobs of each queue, so that a claim costs the same however many jobs of full
    # keys are first in line). A rate counts the starts
    # recorded in `laterite_flow_start` over the last period (any window of that
    # length), written by the same transaction as the claim.
    def _claim_limited(
        self, finished: Sequence[Claim], token: str, now: datetime, worker: str,
        queues: Sequence[str], limit: int, limits: dict[str, QueueLimit], keys: bool = True,
    ) -> list[Sequence[Any]]:
        """Delete `finished` and claim up to `limit` jobs within the limits, in one
        transaction; return the claimed rows (in `sql.COLUMNS` order). `keys`: whether
        concurrency keys may apply (a job registered here declares `concurrency`); without,
        PostgreSQL takes the queue-only claim."""
        if self.postgres and not keys:
            statements = postgres.queue_limited_claim(
                finished, token, worker, queues, limit, limits)
            return postgres.execute_pipeline(self.connection, statements)[-1]
        if self.postgres:
            rows: list[Sequence[Any]] = []
            for deleting in (finished, ()):
                statements = postgres.limited_claim(
                    deleting, token, worker, queues, limit, limits, sql.candidates(limit))
                results = postgres.execute_pipeline(self.connection, statements)
                rows = results[-1]
                if rows or not postgres.limited_claim_locked_keys(results):
                    break
                # It locked keys but took no job of theirs: between its two snapshots another
                # claim took the jobs it had found for them. Once more at once, rather than
                # leave the worker idle until LATERITE_QUEUE_POLL while jobs wait.
            return rows
        rated = [(q, lim) for q, lim in limits.items() if lim.rate is not None]
        with transaction.atomic(using=self.database):
            if finished:
                self._execute_prepared(*self.dialect.delete(finished))
            for queue, lim in rated:
                assert lim.period is not None
                self._execute(sqlite.LIMITED_CLAIM_PRUNE,
                              [queue, self._ts(now - timedelta(seconds=lim.period))])
            rows = self._execute(*sqlite.limited_claim(self._ts, token, now, worker, queues, limit,
                                                       limits), fetch=True)[0]
            names = {lim_queue for lim_queue, _ in rated}
            for row in rows:
                if row[2] in names:
                    self._execute(sqlite.LIMITED_CLAIM_START, [row[2], self._ts(now)])
            return rows

    def _set_concurrency_keys(self, jobs: Sequence[NewJob], ids: Sequence[int | None]) -> None:
        """Write the concurrency key and limit of the pushed jobs that have one (in the
        push's transaction)."""
        for job, job_id in zip(jobs, ids, strict=True):
            if job_id is not None and job.concurrency_limit:
                self._execute(sql.SET_CONCURRENCY_KEY,
                              [job.concurrency_key, job.concurrency_limit, job_id])


    def flush(self) -> bool:
        pushed = getattr(self._local, "callbacks_pushed", False)
        self._local.callbacks_pushed = False
        return pushed

    @guarded
    def requeue_abandoned(self, retry_after: float, reason: str) -> int:
        statement, params = self.dialect.requeue_abandoned(reason, float(retry_after))
        # The attempts whose worker died, added to their jobs' logs (history on).
        statement, params = abandoned_logged(self.postgres, statement, list(params), reason)
        self._finish_orphans()  # batches a dead worker counted to 0
        crash_point("sweep.after_orphans")
        limit, total = self.dialect.SWEEP_BATCH, 0
        while True:
            try:
                count = self._execute(statement, params)[1]
            except IntegrityError:
                # A job with the same key was pushed meanwhile: requeue without the key.
                count = self._execute(sql.without_key(statement), params)[1]
            total += count
            if limit is None or count < limit:
                crash_point("sweep.after_requeue")
                return total

    @guarded
    def next_due(self, queues: Sequence[str]) -> datetime | None:
        if not queues:
            return None
        rows, _ = self._execute(sql.next_due(len(queues)), list(queues), fetch=True)
        return aware(rows[0][0])

    @guarded
    def make_due(self, ids: Iterable[int]) -> int:
        wanted = self._sequences().not_held(job_ids(ids))  # held: their sequence's turn
        if not wanted:
            return 0
        statements = self.dialect.make_due(wanted, self._ts(timezone.now()))
        return len(self._run_all(statements))

    @guarded
    def heartbeat(self, claims: Sequence[Claim]) -> int:
        if not claims:
            return 0
        ids = sorted({c.id for c in claims})
        tokens = sorted({c.token for c in claims})
        return self._execute(sql.heartbeat(len(ids), len(tokens), self.dialect.NOW),
                             [*ids, *tokens])[1]

    # -- settle -----------------------------------------------------------------

    @guarded
    @keeps_callers_settings
    def delete(self, claims: Sequence[Claim]) -> int:
        if not claims:
            return 0
        if (policy := history()) is not None and (record := recorded(policy, claims)):
            return self._delete_recorded(record, claims)
        return self._delete(claims)

    def _delete_recorded(self, record: Sequence[Claim], claims: Sequence[Claim]) -> int:
        """delete, writing the job history's records of `record` (of `claims`) with it: on
        PostgreSQL's plain deletion in its one statement, else in its transaction."""
        if self.dialect is postgres and plain(claims):
            deleted = delete_recorded(self.connection, record, claims)
            if deleted is not None:
                return deleted
        with transaction.atomic(using=self.database):
            self._execute(*insert_finished(self.postgres, record, SUCCEEDED, "", self._ts))
            return self._delete(claims)

    def _delete(self, claims: Sequence[Claim]) -> int:
        """delete's work, once any history records are written (in its transaction)."""
        if any_sequenced([c.payload for c in claims]):
            return self._delete_sequenced(claims)
        if any_marked(claims):
            return self._delete_marked(claims)
        if self.dialect is postgres:
            deleted = postgres.run_delete(self.connection, claims)
            if deleted is not None:
                return deleted
        return self._execute_prepared(*self.dialect.delete(claims))[1]

    @guarded
    def release(
        self, claim: Claim, available_at: datetime | timedelta, error: str = "", *,
        uncharged: bool = False, started: bool = True, checkpoint: str | None = None,
    ) -> bool:
        value: Any
        due, value = "%s", available_at
        if isinstance(available_at, timedelta):
            if self.dialect is postgres:  # counted by the server's clock
                due, value = postgres.AFTER_NOW, available_at.total_seconds()
            else:  # SQLite: one host, whose clock is the store's
                value = timezone.now() + available_at
        if isinstance(value, datetime):
            value = self._ts(value)
        kept = [] if checkpoint is None else [checkpoint]
        # A retry charged a try, of a queue that keeps history: its attempt is kept with
        # the job (attempt_log), for its record, in this same UPDATE.
        logged, log_params = ("", []) if uncharged else attempt_logged(self.postgres, claim,
                                                                       error)
        statement, params = self.dialect.waking(
            sql.release(uncharged, started, due, checkpoint is not None, logged),
            [value, error, *kept, *log_params, claim.id, claim.token])
        try:
            return self._execute_prepared(statement, params)[1] == 1
        except IntegrityError:
            # Another job with this key was pushed between the check and the write.
            return self._execute_prepared(sql.without_key(statement), params)[1] == 1

    @guarded
    def fail(self, claim: Claim, error: str) -> int | None:
        now = self._ts(timezone.now())
        with transaction.atomic(using=self.database):
            # Its history record, from its row.
            record_failed(self._execute, self._ts, self.postgres, self.database, claim, error)
            rows, _ = self._execute(sql.FAIL_DELETE, [claim.id, claim.token], fetch=True)
            if not rows:
                return None
            failed, _ = self._execute(sql.FAIL_INSERT, [*rows[0], now, error], fetch=True)
            if any_marked([claim]):
                self._fail_counted(claim)
            mark = sequence_of(claim.payload)
            if mark is not None:  # a head failed for good: its sequence waits or goes on
                self._sequences().ended([(claim.id, mark, True)])
            crash_point("fail.before_commit")  # dies: rolled back, the claim still held
            return failed[0][0]

    # -- ordered sequences (sequences.py) -------------------------------------------

    def _sequences(self) -> Sequences:
        """The sequence steps, in the open transaction (see sequences.py)."""
        postgres_ = self.postgres

        def woken(queue: str) -> None:
            if postgres_:  # idle workers wait for a notification, as after a push
                self._execute(postgres.RESUME_NOTIFY, [sql.CHANNEL, queue])

        return Sequences(self._execute, self._ts, " FOR UPDATE" if postgres_ else "", woken)

    def _delete_sequenced(self, claims: Sequence[Claim]) -> int:
        """Delete finished jobs whose claims are still held, some of sequences: each
        head deleted lets the next job of its key go, in one transaction."""
        with transaction.atomic(using=self.database):
            plain = [c for c in claims if not c.payload.startswith(MARK)]
            deleted = self._delete(plain) if plain else 0
            ends = []
            for c in claims:
                if c.payload.startswith(MARK) and self._execute(
                        Sequences.DELETE, [c.id, c.token])[1]:
                    mark = sequence_of(c.payload)
                    assert mark is not None
                    ends.append((c.id, mark, False))
            self._sequences().ended(ends)
        return deleted + len(ends)

    def _sequences_forgotten(self, jobs: Sequence[tuple[int, str]]) -> None:
        """Failed jobs of sequences forgotten (job id, key; in the forget's transaction):
        a sequence held by one of them goes on."""
        steps = self._sequences()
        for job_id, key in sorted(jobs, key=lambda j: (j[1], j[0])):
            steps.advance(key, job_id)

    @guarded
    def held_sequences(self, limit: int = 100) -> list[HeldSequence]:
        return self._held_rows(self._sequences().held_sequences(limit))

    @guarded
    def release_sequence(self, key: str) -> bool:
        with transaction.atomic(using=self.database):
            return self._sequences().release(key)

    # -- schedules: the `laterite_schedule` table (ScheduleRecord) ------------------
    #
    # Firing a tick is one transaction: a compare-and-set that moves the schedule's
    # cursor forward to the tick (`UPDATE ... WHERE last_tick < tick`), then the
    # push of its job, then the record of that job. On PostgreSQL a second scheduler's
    # UPDATE waits on the row lock and, once the first commits, finds the cursor at
    # the tick and changes nothing; SQLite serializes the transactions (IMMEDIATE).
    # A scheduler that dies mid-transaction leaves it rolled back: neither the cursor
    # nor the job moved, and the next scheduler fires the tick.
    #
    # A schedule whose rule changed (`rule_hash`) restarts with a compare-and-set of
    # that column, which moves the cursor forward to the moment of the change.

    def _schedule_rows(self) -> Any:
        # Models load after the app registry is ready (this package is imported with
        # stores.database.workflows, which workflows.batches imports while Django loads
        # INSTALLED_APPS): imported on first use.
        from ...models import ScheduleRecord

        return ScheduleRecord._default_manager.using(self.database)

    @guarded
    def schedule_states(self, names: Sequence[str]) -> dict[str, ScheduleState]:
        rows = self._schedule_rows().filter(name__in=list(names))
        return {row.name: _schedule_state(row) for row in rows}

    @guarded
    def add_schedules(self, names: Sequence[str], since: datetime) -> int:
        rows = self._schedule_rows()
        missing = set(names) - set(rows.filter(name__in=list(names)).values_list("name", flat=True))
        if not missing:
            return 0
        before = rows.filter(name__in=missing).count()
        rows.bulk_create([rows.model(name=name, last_tick=since) for name in sorted(missing)],
                         ignore_conflicts=True)
        return rows.filter(name__in=missing).count() - before

    @guarded
    def define_schedules(self, rules: Mapping[str, str], now: datetime) -> list[str]:
        rows = self._schedule_rows()
        restarted = []
        kept = rows.filter(name__in=list(rules)).values_list("name", "rule_hash")
        for name, kept_hash in [(n, h) for n, h in kept if h != rules[n]]:
            with transaction.atomic(using=self.database):
                # The compare-and-set: a scheduler that raced this one finds the new rule.
                changed = rows.filter(name=name, rule_hash=kept_hash).update(rule_hash=rules[name])
                if not changed or not kept_hash:  # none kept (an older version's): adopted
                    continue
                rows.filter(Q(name=name) & (Q(last_tick__isnull=True) | Q(last_tick__lt=now))
                            ).update(last_tick=now)
                restarted.append(name)
        return restarted

    @guarded
    def remove_schedules(self, keep: Sequence[str]) -> int:
        gone = self._schedule_rows().exclude(name__in=list(keep)).exclude(rule_hash=REMOVED)
        if not gone.exists():  # read first: most starts find nothing gone, and write nothing
            return 0
        return gone.update(rule_hash=REMOVED)

    @guarded
    def fire_schedule(self, fire: ScheduleFire) -> Fired:
        rows = self._schedule_rows()
        with transaction.atomic(using=self.database):
            if fire.tick is not None:
                moved = rows.filter(
                    Q(name=fire.name, paused=False)
                    & (Q(last_tick__isnull=True) | Q(last_tick__lt=fire.tick))
                ).update(last_tick=fire.tick)
                if not moved:
                    paused = rows.filter(name=fire.name, paused=True).exists()
                    return Fired("paused" if paused else "lost")
                if fire.job is None:
                    return Fired("advanced")
                if fire.skip_if_running:
                    previous = rows.filter(name=fire.name).values_list("job_id", flat=True).first()
                    if previous is not None and self._job_rows().filter(pk=previous).exists():
                        return Fired("overlap")
            elif fire.job is None:
                raise ValueError("A ScheduleFire needs a tick, a job, or both.")
            else:
                self.add_schedules([fire.name], fire.job.pushed_at)
            assert fire.job is not None
            (job_id,) = self.push([fire.job])
            crash_point("schedule.fire.after_push")  # dies: rolled back, the tick fires again
            rows.filter(name=fire.name).update(
                fired_at=fire.tick or fire.job.pushed_at, job_id=job_id)
        return Fired("pushed", job_id)

    @guarded
    def pause_schedule(self, name: str, paused: bool, now: datetime) -> ScheduleState:
        rows = self._schedule_rows()
        with transaction.atomic(using=self.database):
            self.add_schedules([name], now)
            rows.filter(name=name).update(paused=paused)
            if not paused:
                # Ticks that passed while it was paused do not fire.
                rows.filter(Q(name=name) & (Q(last_tick__isnull=True) | Q(last_tick__lt=now))
                            ).update(last_tick=now)
            return _schedule_state(rows.get(name=name))

    # -- inspect and manage -------------------------------------------------------

    @guarded
    def counts(self, cap: int | None = None) -> dict[str, QueueCounts]:
        now = self._ts(timezone.now())
        if cap is None:
            rows, _ = self._execute(sql.COUNTS, [now, now], fetch=True)
            return self._with_failed({
                queue: QueueCounts(waiting=int(p or 0), delayed=int(d or 0),
                                   running=int(r or 0))
                for queue, p, d, r in rows
            })
        # Each count reads at most cap + 1 index entries: the queues first (a loose
        # index scan), then their counts in one statement sized to them.
        queues = [queue for queue, in self._execute(sql.COUNTED_QUEUES, [], fetch=True)[0]]
        rows, _ = self._execute(sql.capped_counts(len(queues)),
                                [*([now, cap + 1] * 2 if queues else []), *queues, cap + 1],
                                fetch=True)
        counts: dict[str, QueueCounts] = {}
        running = 0
        for queue, waiting, delayed, claimed in rows:
            found = counts.setdefault(queue, QueueCounts())
            found.waiting += int(waiting)
            found.delayed += int(delayed)
            found.running += int(claimed)
            running += int(claimed)
        for found in counts.values():
            for state in ("waiting", "delayed"):
                if getattr(found, state) > cap:
                    setattr(found, state, cap)
                    found.capped.add(state)
            if running > cap:
                # The running jobs were read up to the cap in all: each queue's count
                # is the least it holds.
                found.running = min(found.running, cap)
                found.capped.add("running")
        return self._with_failed(counts, cap)

    @guarded
    def running(self, limit: int = 100) -> list[Running]:
        rows, _ = self._execute(sql.RUNNING, [limit], fetch=True)
        return [
            Running(id=id_, name=name, queue=queue, attempts=attempts,
                    claimed_by=claimed_by or "", progress=Progress.parse(progress, token))
            for id_, name, queue, attempts, claimed_by, progress, token in rows
        ]

    @guarded
    def minutes(self, since: datetime) -> list[Minute]:
        rows, _ = self._execute(sql.MINUTES, [self._ts(minute_start(since))], fetch=True)
        return [Minute(queue, aware(minute), int(s), int(f),
                       None if latency is None else float(latency))
                for queue, minute, s, f, latency in rows]

    @guarded
    def sample_latency(self, minute: datetime, queues: Sequence[str]) -> bool:
        """See Store.sample_latency: a `latency` on the queue's row of the minute (made if
        the minute has no counts yet); a worker that finds one written leaves it. Two
        that look at once both write, and the first write stays."""
        at = self._ts(minute_start(minute))
        rows, _ = self._execute(sql.LATENCY_SAMPLED, [at], fetch=True)
        if rows:
            return False
        now = timezone.now()
        oldest = self.oldest_waiting()
        ages = {queue: 0.0 for queue in queues}
        ages.update({queue: max((now - due).total_seconds(), 0.0)
                     for queue, due in oldest.items()})
        with transaction.atomic(using=self.database):
            for queue, age in sorted(ages.items()):
                self._execute(sql.SAMPLE_LATENCY, [queue, at, age])
            # Once a minute of them all: let the old minutes go (on an idle system
            # nothing else would).
            self._execute(sql.PRUNE_MINUTES, [self._ts(minute_start(minute) - KEEP)])
        return True

    @guarded
    def oldest_waiting(self) -> dict[str, datetime]:
        rows, _ = self._execute(sql.OLDEST_WAITING, [self._ts(timezone.now())], fetch=True)
        return {queue: aware(oldest) for queue, oldest in rows if oldest is not None}

    @guarded
    def job_states(self, ids: Iterable[int]) -> dict[int, str]:
        wanted = job_ids(ids)
        states: dict[int, str] = {}
        now = timezone.now()
        rows = self._job_rows().filter(pk__in=wanted)
        for job_id, token, available_at in rows.values_list("id", "token", "available_at"):
            states[job_id] = ("running" if token is not None else
                              "delayed" if available_at > now else "waiting")
        states.update(self._failed_states(wanted))
        return states


    @guarded
    def save_progress(self, items: Sequence[tuple[Claim, str]]) -> int:
        saved = 0
        with transaction.atomic(using=self.database):
            for claim, text in items:
                saved += self._execute(sql.SAVE_PROGRESS, [text, claim.id, claim.token])[1]
        return saved

    @guarded
    def checkpoint(self, claim: Claim) -> str:
        rows, _ = self._execute(sql.CHECKPOINT, [claim.id], fetch=True)
        return rows[0][0] if rows else ""

    @guarded
    @keeps_callers_settings
    def save_checkpoint(self, claim: Claim, text: str, *, durable: bool = True) -> bool:
        statement = sql.SAVE_CHECKPOINT
        if not durable and self.dialect is postgres:
            statement = postgres.SAVE_CURSOR
        return self._execute_prepared(statement, [text, claim.id, claim.token])[1] == 1

    def joins_callers_transaction(self) -> bool:
        connection = self.connection
        return connection.in_atomic_block or not connection.autocommit

    def cursor_sender(self, claim: Claim) -> CursorSender | None:
        """See Store.cursor_sender: on PostgreSQL, an UPDATE sent on a connection of its
        own (cursors.py); on SQLite none (a thread saves them)."""
        if not self.postgres:
            return None
        connection = self.connection
        connection.ensure_connection()
        driver, params = type(connection.connection), connection.get_connection_params()
        return PostgresCursorSender(lambda: driver.connect(**params, autocommit=True), claim)

    @guarded
    def add_minutes(self, minutes: Sequence[Minute]) -> None:
        if not minutes:
            return
        first = min(m.minute for m in minutes)
        with transaction.atomic(using=self.database):
            for m in minutes:
                self._execute(sql.ADD_MINUTE,
                              [m.queue, self._ts(m.minute), m.succeeded, m.failed])
            if self._pruned_before is None or first > self._pruned_before:
                # Once a minute per worker: let the old minutes go.
                self._pruned_before = first
                self._execute(sql.PRUNE_MINUTES, [self._ts(first - KEEP)])

    @guarded
    def clear(self, queue: str | None = None) -> int:
        if queue is not None and (not isinstance(queue, str) or not queue):
            raise ValueError(f"queue is {queue!r}; name a queue, or pass None for every queue.")
        deleted = self._clear(queue)
        self._vacuum.after_clear(self.connection, deleted)
        return deleted

    # -- fair queues (fair_rows.py) and the live workers' list (workers.py) ----------

    @guarded
    def fair_waiting(self, top: int = TOP_KEYS) -> dict[str, WaitingByKey]:
        return self._fair.waiting(top)

    @guarded
    def prune_fair_turns(self) -> int:
        return self._fair.prune()

    @guarded
    def beat_worker(self, info: WorkerInfo) -> None:
        self._workers.beat(info)

    @guarded
    def remove_worker(self, worker_id: str) -> None:
        self._workers.remove(worker_id)

    @guarded
    def workers(self) -> list[WorkerInfo]:
        return self._workers.read()

    @guarded
    def tidy(self) -> int:
        pruned = self._fair.prune_now()  # the turns of fair keys gone (fair_rows.py)
        pruned += self._history_pruning.maybe()  # records past their keep (history.py)
        if not self.postgres:
            return pruned  # SQLite reuses the space of deleted rows: nothing piles up
        return pruned + self._vacuum.maybe(self.connection)

    @guarded
    def ping(self) -> None:
        self._execute(sql.PING, [])

    # -- flow control: paused queues, cancels (see flow/) ---------------------------
    #
    # Pauses are rows of `laterite_paused_queue`; a resume on PostgreSQL notifies the
    # workers' channel as a push does (on SQLite the waiting workers read the paused
    # set again within LATERITE_QUEUE_POLL). A cancel marks each job it names
    # (`cancel_requested_at`, which a running job's heartbeat reads), then deletes the
    # waiting ones into the failed list, in one transaction.

    @guarded
    def pause(self, queues: Sequence[str]) -> None:
        now = self._ts(timezone.now())
        for queue in dict.fromkeys(queues):
            self._execute(sql.PAUSE, [queue, now])

    @guarded
    def resume(self, queues: Sequence[str]) -> None:
        if not queues:
            return
        self._execute(sql.resume(len(queues)), list(queues))
        if self.postgres:
            # Wake the idle workers as a push would (delivered at commit).
            for queue in dict.fromkeys(queues):
                self._execute(postgres.RESUME_NOTIFY, [sql.CHANNEL, queue])

    @guarded
    def paused_queues(self) -> set[str]:
        rows, _ = self._execute(sql.PAUSED_QUEUES, [], fetch=True)
        return {row[0] for row in rows}

    @guarded
    def cancel(self, ids: Iterable[int]) -> dict[int, str]:
        wanted = list(dict.fromkeys(job_ids(ids)))
        result = dict.fromkeys(wanted, Outcome.FINISHED)
        if not wanted:
            return result
        now = self._ts(timezone.now())
        with transaction.atomic(using=self.database):
            # Marked first, waiting or running: the mark holds each row (its lock on
            # PostgreSQL, the write lock on SQLite) until the commit, so the delete below
            # sees the jobs as the mark found them, and a release that comes after finds
            # the mark (the job's next claim fails it, rules.before_run). Deleted then
            # marked, each statement with its own snapshot, a release committed between
            # the two escaped both: "finished", and the job retried.
            marked, _ = self._execute(sql.cancel_mark(len(wanted)), [now, *wanted], fetch=True)
            for (job_id,) in marked:
                result[job_id] = Outcome.ASKED
            logs = kept_logs(self._execute, wanted)  # their attempts, for their records
            rows, _ = self._execute(sql.cancel_delete(len(wanted)), wanted, fetch=True)
            for row in rows:
                self._execute(sql.FAIL_INSERT, [*row, now, reason(False)])
                result[row[0]] = Outcome.CANCELLED
            self._failed_payloads([row[3] for row in rows])
            record_cancelled(self.database, rows, reason(False), logs)  # their history records
            # A cancelled head of a sequence is one failed for good; a held job just goes.
            self._sequences().ended([(row[0], mark, True) for row in rows
                                     if (mark := sequence_of(row[3])) is not None])
            crash_point("cancel.before_commit")  # dies: rolled back, nothing cancelled
        return result

    @guarded
    def cancel_requested(self, claims: Sequence[Claim]) -> set[int]:
        if not claims:
            return set()
        rows, _ = self._execute(
            sql.cancel_requested(len(claims)),
            [value for c in claims for value in (c.id, c.token)], fetch=True,
        )
        return {row[0] for row in rows}

    def wait(
        self, queues: Sequence[str], timeout: float, stop: Any, *,
        longest: float | None = None,
    ) -> None:
        self._waiting.wait(queues, timeout, stop, longest=longest)

    def quiet(self) -> bool:
        return self._waiting.quiet()

    def _waiter(self) -> Any:
        """This thread's SQLite waiter (wait.Waiter) on the store's database file."""
        return self._waiting.waiter()

    # -- chains and batches (workflows.py holds the batch counts) ------------------

    def _delete_marked(self, claims: Sequence[Claim]) -> int:
        """Delete finished jobs whose claims are still held, some of a workflow: push the
        next links and count the batch ends of those deleted, in one transaction."""
        if self.postgres and not any('"chain":' in c.payload for c in claims):
            return self._delete_counted(claims)
        # On PostgreSQL as the plain deletion: committed without waiting for the WAL
        # flush (see postgres.py). A crash of the server that loses the commit loses the
        # next link and the count with the deletion, so the job runs again, and they
        # come with it then: never one without the other.
        statement, params = self.dialect.delete_marked(claims)
        with transaction.atomic(using=self.database):
            rows, _ = self._execute(statement, params, fetch=True)
            deleted = {row[0] for row in rows}
            done = [c for c in claims if c.id in deleted]
            links: list[NewJob] = [new for c in done for new in next_links(c)]
            if links:
                self.push(links)
                crash_point("chain.next.after_push")  # dies: rolled back, the job runs again
            ends = ends_of(done)
            count_ends(self.database, ends, self.push)
            if ends:
                crash_point("batch.count.before_commit")  # dies: rolled back, as above
        return len(deleted)

    def _settle_and_claim_marked(self, finished: Sequence[Claim], queues: Sequence[str],
                                 worker: str, limit: int, limits: Limits) -> list[Claim]:
        """Finished jobs, some of a chain or batch: their deletion with what their end brings
        (the next link: claimable by this very claim), then the claim, in one transaction
        (one commit). On PostgreSQL, with no chain link due and no limit on the claim, one
        statement (`_counted_claim`)."""
        if (self.postgres and not self.connection.in_atomic_block
                and not any('"chain":' in c.payload for c in finished)
                and not limits):
            return self._counted_claim(finished, queues, worker, limit)
        with transaction.atomic(using=self.database):
            self._delete_marked(finished)
            return self._settle_and_claim((), queues, worker, limit, limits)

    def _fail_counted(self, claim: Claim) -> None:
        """Count a job of a batch moved to the failed list (in fail()'s transaction)."""
        count_ends(self.database, ends_of([claim], failed=True), self.push)

    def _clear(self, queue: str | None) -> int:
        """Delete every job (of `queue`), waiting or running; return how many. A deleted job
        of a batch counts as failed on it (it never runs, as one cancelled through
        queue_cancel), in the same transaction, so its batch still ends."""
        params = [] if queue is None else [queue]
        batched = sql.CLEAR_BATCHED if queue is None else sql.CLEAR_QUEUE_BATCHED
        with transaction.atomic(using=self.database):
            marked, _ = self._execute(batched, ['%"batch":[%', *params], fetch=True)
            count = self._execute(sql.CLEAR if queue is None else sql.CLEAR_QUEUE, params)[1]
            self._failed_payloads([text for (text,) in marked])
            self._sequences().orphans()  # sequences whose head was cleared go on
        return count + len(marked)

    @guarded
    def drop_batch(self, batch_id: int) -> int:
        """Delete the jobs of a cancelled batch that have not started, counting each as
        ended (not failed); return how many."""
        with transaction.atomic(using=self.database):
            rows, _ = self._execute(self.dialect.DROP_BATCH_FIND, [batch_pattern(batch_id)],
                                    fetch=True)
            # The pattern also matches a job whose arguments hold such a list: only the
            # jobs whose own mark names this batch are removed.
            rows = [row for row in rows if (marks_of(row[1]).batch or (None,))[0] == batch_id]
            ends: list[End] = []
            removed = 0
            for chunk in range(0, len(rows), 500):
                ids = [row[0] for row in rows[chunk:chunk + 500]]
                gone, _ = self._execute(sql.drop_batch_delete(len(ids)), ids, fetch=True)
                removed += len(gone)
                ends += ends_of_payloads([text for _, text in gone])
            count_ends(self.database, ends, self.push)
        return removed

    def _failed_payloads(self, payloads: Sequence[str]) -> None:
        """Count the jobs of these payloads, moved to the failed list, on their batches."""
        count_ends(self.database, ends_of_payloads(payloads, failed=True), self.push)

    def _counted_claim(self, finished: Sequence[Claim], queues: Sequence[str],
                       worker: str, limit: int) -> list[Claim]:
        """PostgreSQL, finished jobs of batches (no chain link due, no limit on the claim):
        their deletion and count with the plain claim, in one statement (COUNTED_CLAIM: one
        round trip, as the plain drain's claim). The callbacks of a batch it counted down
        to 0 are pushed just after, by `finish_settled` (exactly once: it marks the batch
        finished in the transaction that pushes them); a worker that dies in between
        leaves the batch to the sweep (`finish_orphans`)."""
        params = postgres.counted_claim_params(
            finished, batch_ends(finished),
            postgres.claim_params(uuid.uuid4().hex, worker, queues, limit))
        rows, _ = self._execute_prepared(postgres.COUNTED_CLAIM, params, fetch=True)
        settled = rows[0][-1] if rows else None
        if settled:
            crash_point("batch.count.after_decrement")  # committed; callbacks: the sweep's
        if settled and finish_settled(self.database, settled, self.push):
            # Pushed after this claim was made: the worker's flush() says so, so that a
            # worker about to stop for an empty queue claims once more.
            self._local.callbacks_pushed = True
        claims = [claim_from_row(row) for row in rows if row[0] is not None]
        return sorted(claims, key=lambda c: c.position)

    def _finish_orphans(self) -> int:
        """The sweep's part: push the callbacks of batches counted down to 0 by a worker
        that died before it pushed them (see `_counted_claim`)."""
        return finish_settled(self.database, None, self.push)

    def _delete_counted(self, claims: Sequence[Claim]) -> int:
        """PostgreSQL, jobs of batches and plain ones: the deletion and the counts in one
        statement (postgres.COUNTED_DELETE), the callbacks of a batch it finished pushed
        before the commit."""
        with transaction.atomic(using=self.database):
            rows, _ = self._execute_prepared(postgres.COUNTED_DELETE,
                                 postgres.counted_delete_params(claims, batch_ends(claims)),
                                 fetch=True)
            self._finish_batches(rows)
            crash_point("batch.count.before_commit")
        return int(rows[0][0]) if rows else 0

    def _finish_batches(self, rows: Sequence[Sequence]) -> None:
        """Push the callbacks of the batches COUNTED_DELETE took to 0 (in its transaction)."""
        done = [row for row in rows if row[1] is not None and row[2] <= 0]
        if not done:
            return
        jobs: list[NewJob] = []
        with self.connection.cursor() as cursor:
            for row in done:
                jobs += finished_jobs(cursor, row[1], row[2:], 0)
        if jobs:
            self.push(jobs)

    @guarded
    def close(self) -> None:
        self._waiting.close()
        self.connection.close()

    @guarded
    def unclaimed_payloads(self, after: int, limit: int) -> list[tuple[int, str]]:
        rows = self._job_rows().filter(pk__gt=after, token__isnull=True).order_by("pk")
        return list(rows.values_list("pk", "payload")[:limit])

    @guarded
    def replace_payloads(self, changes: Sequence[tuple[int, str, str]]) -> int:
        count = 0
        with transaction.atomic(using=self.database):
            for pk, old, new in changes:
                # Only a row still unclaimed and unchanged: a claim (token set) or a
                # debounced push (a new payload) since it was read wins.
                count += self._job_rows().filter(
                    pk=pk, token__isnull=True, payload=old).update(payload=new)
        return count
