"""Jobs kept in Redis, through a django-redis cache's raw client.

One class, RedisStore, does the work of every operation; what it leans on are plain
helpers: the Lua scripts (lua/*.lua, one a file, run by name through the one runner,
scripts.py, each call one EVALSHA), the key layout (keys.py), the values to and from
the scripts (values.py), the limited push and claim's arguments (limits.py), the
failed rows (failed.py), and the idle wait it holds (wait.py, `Waiting`). Every
operation that touches more than one key is one Lua script. The raw client skips the
cache's key prefix and serializer, so every key lives under LATERITE_QUEUE_PREFIX and
payloads are the JSON text the job layer wrote.

The failed list stays in the database. `fail()` marks the claim in Redis,
writes the FailedJob row, then removes the job from Redis; if the process dies
between the row and the removal, the job stays claimed and marked, and once
its claim expires `requeue_abandoned` finds the row and finishes the removal
(or, with no row, returns the job to its queue); retrying or forgetting that row
first finishes the removal, so a handled row never brings its job back. Nothing is
lost and no job is both failed and queued again (see failed.py).

A push inside a database transaction goes through the database outbox, a batch's
counts live in the database, and a cancel holds its jobs under a claim of its own:
each section of the class says how (the outbox; chains and batches; flow control).
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from django.db import close_old_connections, transaction
from django.utils import timezone

from ...conf import settings
from ...core.cancel import Outcome, reason
from ...core.checkpoint import CursorSender
from ...core.crash_points import crash_point
from ...core.ending import End, any_marked, ends_of_payloads
from ...core.fairness import TOP_KEYS, WaitingByKey
from ...core.history import status_of
from ...core.limits import Limits
from ...core.marks import marks_of
from ...core.minutes import KEEP, Minute, minute_start
from ...core.progress import Progress
from ...core.sequences import HeldSequence, any_sequenced
from ...core.values import Claim, NewJob, QueueCounts, Running, job_ids
from ...core.workers import WorkerInfo
from ...exceptions import LateriteConfigurationError, PushNotReplicated, StoreUnavailable
from ..base import Store
from ..callbacks import limits_of, next_links, with_limit
from ..database.history import HistoryPruning
from ..database.workflows import count_ends, finish_settled
from ..errors import database_outage, describe_redis, guarded, redis_outage
from ..schedule_state import Fired, ScheduleFire, ScheduleState
from . import alias as redis_alias
from . import cluster as redis_cluster
from . import limits as redis_limits
from . import scripts as calls
from . import sequences as redis_sequences
from .browse import STATES as BROWSED_STATES
from .browse import WINDOW, Browsed, JobBrowser
from .cursors import RedisCursorSender
from .failed import CHUNK, claim_token, failed_row, marked_claims, row_exists, write_row
from .fair import FairEntries
from .history import MOVE_CHUNK, HistoryEntries
from .persistence import persistence_warning
from .values import (
    AGAIN_WITHIN,
    EPOCH,
    PUSH_CHUNK,
    claim_args,
    debounced_args,
    dt,
    job_fields,
    pack,
    push_args,
    push_packed,
    text,
    us,
)
from .values import claims as claims_from_rows
from .wait import Waiting
from .workers import WorkerEntries

if TYPE_CHECKING:
    from redis import Redis

__all__ = ["RedisStore"]

logger = logging.getLogger("laterite")

# The first characters of the token a cancel holds a waiting job under (a worker's
# claim token is a bare uuid4 hex, so the two never meet).
CANCEL_TOKEN = "cancel-"

# The fields of a running job's hash that `running` reads.
_RUNNING_FIELDS = ("name", "queue", "attempts", "claimed_by", "progress", "token")

# The fields of a retried job's hash that name the failed job it came from.
_LINK_FIELDS = ("retried_from_id", "retried_from_error")

# Rows per outbox move transaction (and per Redis push).
OUTBOX_BATCH = 500

# The fields of a NewJob an outbox row keeps, the same on both: written to the row at
# the push, read back into a NewJob at the move (the concurrency key is not kept).
KEPT = ("name", "queue", "payload", "priority", "pushed_at", "available_at", "retry_until",
        "unique_key", "delay", "debounce", "debounce_max", "fair_key", "fair_cost")

# Items of a list of ends counted per database transaction (each the ends of one
# FINISH call, or one end of DROP_BATCH); jobs looked at per DROP_BATCH call (each
# call holds Redis meanwhile).
ENDS_CHUNK = 500
DROP_CHUNK = 500
# Seconds between a busy worker's counts of the ends it listed.
APPLY_EVERY = 0.5


def _due_of(member: bytes | str) -> int:
    """The due time (microseconds) in a ready set's member "<available_at>:<id>"."""
    return int(text(member).split(":", 1)[0])


def _minute_number(moment: datetime) -> int:
    """The number of the minute of `moment` (its key: `P:minutes:<number>`)."""
    return int(moment.timestamp() // 60)


def _outbox_mark(row: Any) -> str:
    """A row's mark for the PUSH script's `once`: its id and push time (microseconds),
    unique even if the table's ids start again."""
    return f"outbox:{row.pk}:{int(row.pushed_at.timestamp() * 1_000_000)}"


def _schedule_state(name: str, fields: dict) -> ScheduleState:
    values = {text(k): text(v) for k, v in fields.items()}
    job_id = values.get("job_id")
    return ScheduleState(
        name=name, last_tick=dt(values.get("last_tick")), fired_at=dt(values.get("fired_at")),
        job_id=int(job_id) if job_id and job_id != "0" else None,
        paused=values.get("paused") == "1", rule_hash=values.get("rule_hash") or None,
    )


class Counter:
    """The thread of a worker's process that counts the ends the process lists (by
    `count`, the store's count of its own list), so that the database's part of a
    count (a few milliseconds per thousand ends) overlaps the jobs the worker runs
    meanwhile. A count it has not made when the process dies is the sweep's, as for
    any worker that died."""

    def __init__(self, count: Callable[[], object]) -> None:
        self._count = count
        self.pid = os.getpid()
        self.due = threading.Event()
        threading.Thread(target=self._run, name="laterite-batch-ends", daemon=True).start()

    def _run(self) -> None:
        while True:
            self.due.wait()
            self.due.clear()
            close_old_connections()  # a connection an error left unusable goes
            self._count()


class RedisStore(Store):
    """The `redis` store: a django-redis cache alias, keys under a prefix."""

    # Redis cannot join a database transaction: inside one, push_on_commit() keeps the
    # jobs in a database outbox that commits with the caller's data.
    transactional_push = False

    def __init__(self, *, database: str = "default", alias: str, prefix: str,
                 ephemeral: bool = False, cluster: bool = False) -> None:
        super().__init__(database=database)
        if not isinstance(prefix, str) or not prefix:
            raise LateriteConfigurationError(
                f"LATERITE_QUEUE_PREFIX is {prefix!r}; it must be a non-empty string."
            )
        problem = redis_alias.shared_alias_problem(alias)
        if problem is not None:
            raise LateriteConfigurationError(f"{problem} {redis_alias.HINT}")
        if cluster and (found := redis_alias.cluster_problems(alias, prefix)) is not None:
            raise LateriteConfigurationError(" ".join(found))
        self.alias = alias
        # On a Redis Cluster (cluster.py) every key lives under the hash tag {prefix}:
        # one slot, on the primary the client is that of (`client`).
        self.cluster = cluster
        self.prefix = redis_cluster.tagged(prefix) if cluster else prefix
        # Whether the cluster's topology is to be read again before the next call (its
        # primary was lost or moved: `_outage`).
        self._refresh = False
        # Whether a server that keeps nothing on disk is meant (no warning of it).
        self.ephemeral = ephemeral
        self._client: Redis | None = None
        self._waiting = Waiting(self.prefix, database, lambda: self.client)
        # This thread's quiet spell (wait.py), the waiting's own.
        self.quiet_state = self._waiting.quiet_state
        # Batch ends listed by this process, not counted yet (_ends_listed).
        self._ends_pending = False
        self._ends_applied = 0.0
        # Ends counted since the last flush: their callbacks may wait to be claimed.
        self._ends_counted = False
        # One count of this process's list at a time; a worker's counts run in a thread
        # of their own (Counter) once it said it manages its connections.
        self._ends_lock = threading.Lock()
        self._ends_in_background = False
        self._ends_counter: Counter | None = None
        # The fair queues (fair.py), the live workers' list (workers.py), the job
        # history's records (history.py) and its pruning (database/history.py).
        self._fair = FairEntries(self.prefix, lambda: self.client, self.queues, self._run)
        self._browser = JobBrowser(self.prefix, lambda: self.client, self.queues)
        self._workers = WorkerEntries(self.prefix, lambda: self.client, self._run)
        self._history = HistoryEntries(database, self.prefix, lambda: self.client, self._run)
        self._history_pruning = HistoryPruning(database)

    def __repr__(self) -> str:
        return f"<RedisStore alias={self.alias!r} prefix={self.prefix!r}>"

    # -- plumbing ---------------------------------------------------------------

    @property
    def client(self) -> Redis:
        """The raw redis-py client of the cache alias (pooled by django-redis).

        Looked up once: the client is thread-safe and its pool is django-redis's,
        shared by the process, so a lookup per call would only cost time.
        """
        client = self._client
        if client is None:
            client = self._client = self._connect_node() if self.cluster else self._connect()
        return client

    def _connect_node(self) -> Redis:
        """On a Redis Cluster: the client of the primary that serves the prefix's slot
        (cluster.py), the topology read again first if that primary was lost."""
        try:
            cluster = redis_cluster.cluster_client(self.alias)
        except ImportError as e:  # pragma: no cover - redis is in the `redis` extra
            raise LateriteConfigurationError(
                "LATERITE_QUEUE_REDIS_CLUSTER is True but redis-py is not installed: it "
                "needs the 'redis' extra.") from e
        if self._refresh:
            cluster.nodes_manager.initialize()
            self._refresh = False
        return redis_cluster.node_client(cluster, self.prefix)

    def _connect(self) -> Redis:
        try:
            from django_redis import get_redis_connection
        except ImportError as e:
            raise LateriteConfigurationError(
                "LATERITE_QUEUE_STORE is 'redis' but django-redis is not installed: it "
                "needs django-redis and hiredis (the 'redis' extra)."
            ) from e
        try:
            return get_redis_connection(self.alias, write=True)
        except NotImplementedError as e:
            raise LateriteConfigurationError(
                f"The cache {self.alias!r} named by LATERITE_QUEUE_REDIS is not a "
                f"django-redis cache."
            ) from e

    def _outage(self, error: BaseException) -> StoreUnavailable | None:
        """Redis's lost or refused connections, and the failed list's database errors;
        on a Redis Cluster, an answer that the prefix's slot has moved too (the next
        call looks its primary up again)."""
        if self.cluster and redis_cluster.stale(error):
            node = self._client
            self.close()
            said = " ".join(str(error).split()) or type(error).__name__
            return StoreUnavailable(
                f"The redis store cannot be reached: {describe_redis(self.alias, node)} "
                f"(its Redis Cluster's primary for the prefix): {type(error).__name__}: {said}")
        return redis_outage(error, self.alias) or database_outage(
            error, self.database, store="redis"
        )

    def _run(self, name: str, args: Sequence[Any]) -> Any:
        """Run script `name` (lua/<name>.lua, the name in any case) with the prefix and
        `args`: one round trip."""
        return calls.run(self.client, name.lower(), [self.prefix, *args])

    def _pipeline(self, steps: Sequence[tuple[str, Sequence[Any]]],
                  ran_late: list[int] | None = None) -> list[Any]:
        """Run several scripts in one round trip (sent together, not a transaction);
        the positions of those Redis did not know yet, run after it, go in `ran_late`
        (scripts.finish)."""
        queued = {i: (name, [self.prefix, *args]) for i, (name, args) in enumerate(steps)}
        # Sent again (an answer lost), a claim says so (scripts.claim_again); the
        # other scripts of a pipeline (DELETE, FINISH) do nothing more when run twice.
        again = {i: (name, calls.claim_again(args) if name == "claim" else args)
                 for i, (name, args) in queued.items()}
        answers = calls.together(self.client, [calls.evalsha(*step) for step in queued.values()],
                                 [calls.evalsha(*step) for step in again.values()])
        return calls.finish(self.client, answers, again, ran_late)

    def key(self, *parts: str) -> str:
        """Return the Redis key for `parts` under this store's prefix."""
        return ":".join((self.prefix, *parts))

    # -- push ---------------------------------------------------------------------
    # One PUSH script per chunk of jobs, one chunk after the other (a lone job without a
    # unique key by the leaner PUSH_ONE), each sent again if its answer is lost and
    # stored once all the same (resend.py); the limited push for jobs with a
    # concurrency key (limits.py); the replicated push when LATERITE_QUEUE_REDIS_WAIT is
    # set; the outbox inside a database transaction.

    @guarded
    def push(self, jobs: Sequence[NewJob], *, once: Sequence[str] | None = None
             ) -> list[int | None]:
        """Push `jobs`; with `once` (a mark per job), a job whose mark an earlier push
        set is not stored again (the outbox's moves)."""
        if not jobs:
            return []
        now = str(us(timezone.now()))
        wait = settings.REDIS_WAIT
        if wait is not None:
            return self._push_replicated(now, jobs, wait, once)
        if any_sequenced([job.payload for job in jobs]):
            # Jobs of a sequence: each its key's head, or held behind it (push_seq.lua).
            return [int(i) or None for i in self._push(
                "push_seq", redis_sequences.push_seq_args(now, jobs, once))]
        if any(job.fair_cost is not None for job in jobs):
            # Jobs of a fair queue take their place by their key's turn (push_fair.lua).
            return [int(i) or None for i in self._push(
                "push_fair", redis_limits.push_fair_args(now, jobs, once))]
        if any(job.concurrency_limit for job in jobs):
            # Jobs with a concurrency limit carry its key (limits.py).
            return [int(i) or None for i in self._push(
                "push_limited", redis_limits.push_limited_args(now, jobs, once))]
        if len(jobs) == 1 and once is None and jobs[0].unique_key is None:
            # The push most code makes, by the lean script (lua/push_one.lua).
            return [int(self._push("push_one", (now, *job_fields(jobs[0])[:7]))[0])]
        # One chunk at a time: a chunk sent again (its answer lost) is known by its
        # number as its sender's last push (resend.py).
        return [int(i) or None for start in range(0, len(jobs), PUSH_CHUNK)
                for i in self._push("push", push_packed(
                    now, jobs[start : start + PUSH_CHUNK],
                    None if once is None else once[start : start + PUSH_CHUNK]))]

    def _push(self, name: str, args: Sequence[Any]) -> Any:
        """Run push script `name` with the prefix and `args` (scripts.run_push)."""
        return calls.run_push(self.client, name, [self.prefix, *args])

    def _push_replicated(self, now: str, jobs: Sequence[NewJob], wait: float,
                         once: Sequence[str] | None = None) -> list[int | None]:
        """Push, then wait up to `wait` seconds for one replica to have the jobs.

        Redis replicates asynchronously: a push the primary acknowledged is lost if
        the primary fails before a replica copied it. With LATERITE_QUEUE_REDIS_WAIT
        a push returns once a replica has it, and raises PushNotReplicated if none
        confirmed it in time (the jobs are on the primary all the same).
        """
        if any_sequenced([job.payload for job in jobs]):
            steps = [("push_seq", redis_sequences.push_seq_args(now, jobs, once))]
        elif any(job.fair_cost is not None for job in jobs):
            steps = [("push_fair", redis_limits.push_fair_args(now, jobs, once))]
        elif any(job.concurrency_limit for job in jobs):
            steps = [("push_limited", redis_limits.push_limited_args(now, jobs, once))]
        else:
            steps = [("push", push_packed(now, jobs[i : i + PUSH_CHUNK],
                                          None if once is None else once[i : i + PUSH_CHUNK]))
                     for i in range(0, len(jobs), PUSH_CHUNK)]
        ids: list[int | None] = []
        replicas = 1
        for name, args in steps:  # one chunk at a time, each its own push (resend.py)
            result, confirmed = calls.run_push_replicated(
                self.client, name, [self.prefix, *args], wait)
            ids += [int(i) or None for i in result]
            replicas = min(replicas, confirmed)
        if replicas < 1:
            raise PushNotReplicated(
                f"The redis store pushed {len(jobs)} job(s) to {describe_redis(self.alias)}, "
                f"but no replica confirmed them within {wait:g} s "
                f"(LATERITE_QUEUE_REDIS_WAIT): a failover now would lose them.", ids)
        return ids

    @guarded
    def push_debounced(self, job: NewJob) -> tuple[int, bool]:
        job_id, replaced = self._push_debounced(job)
        return job_id, replaced

    def _push_debounced(self, job: NewJob, mark: str = "") -> tuple[int, bool]:
        """Run PUSH_DEBOUNCED (lua/push_debounced.lua) for `job`; with `mark` (an outbox
        row's), a job whose mark an earlier push set is not pushed again (id 0). Waits
        for a replica as `push` does when LATERITE_QUEUE_REDIS_WAIT is set."""
        args = [self.prefix, str(us(timezone.now())), *debounced_args(job), mark]
        wait = settings.REDIS_WAIT
        if wait is None:
            result = self._push("push_debounced", args[1:])
        else:
            result, confirmed = calls.run_push_replicated(
                self.client, "push_debounced", args, wait)
            if confirmed < 1:
                raise PushNotReplicated(
                    f"The redis store pushed a debounced job to {describe_redis(self.alias)}, "
                    f"but no replica confirmed it within {wait:g} s "
                    f"(LATERITE_QUEUE_REDIS_WAIT): a failover now would lose it.",
                    [int(result[0]) or None])
        return int(result[0]), bool(int(result[1]))

    @guarded
    def push_on_commit(self, jobs: Sequence[NewJob]) -> None:
        """Keep `jobs` in the database outbox, in the open transaction; they move to
        Redis on commit, or at a worker's sweep if Redis is away."""
        self._hold(jobs)

    # -- the outbox: pushes made inside a database transaction ---------------------
    # Redis cannot join the caller's transaction, so a push inside
    # `transaction.atomic()` is written to the `OutboxJob` table in it: it commits with
    # the caller's data or rolls back with it. After the commit a hook moves the rows
    # to Redis; if Redis is away then, the hook logs a warning and the rows wait for
    # the workers' periodic sweep (`requeue_abandoned`), which moves whatever the
    # outbox holds.
    #
    # A move deletes its rows and pushes them to Redis in one database transaction
    # (rows locked with SKIP LOCKED on PostgreSQL; SQLite lets one writer in at a
    # time), so two movers never move one row twice, and a failed push leaves the rows
    # in place. If the commit is lost after the push (the mover killed between the
    # two), the rows come back and are moved again: each row's push carries a mark
    # that Redis keeps for a week (ONCE_TTL), and a job whose mark is set is not stored
    # a second time (a job with a concurrency limit too: its script is PUSH's, marks
    # included). Unique keys are checked when a row reaches Redis, where a duplicate is
    # dropped. A job due at once or after a delay (NewJob.delay) keeps its delay in the
    # row and is due that long after its move, by Redis's clock: the clock every due
    # time is compared with, and the only one the pusher and the mover (another host's
    # sweep) share. The time it spent in the outbox is not taken off, which would need
    # a clock common to both; a move follows the commit within milliseconds, and while
    # Redis is away, which is what keeps rows longer, no push reaches it either.
    # A retry from the failed list takes this road too (`_push_retried`), so its jobs
    # reach Redis only once the deletion of their failed rows commits.

    def _outbox_rows(self) -> Any:
        # The models load after the app registry: imported on first use.
        from ...models import OutboxJob

        return OutboxJob.objects.using(self.database)

    def _hold(self, jobs: Sequence[NewJob],
              then: Callable[[list[int | None]], None] | None = None) -> None:
        """Write `jobs` to the outbox in the open transaction; move them when it commits.

        `then`, if given, is called after that move with the jobs' ids in Redis, in order
        (None for one not stored, or moved by someone else); it must not raise.
        """
        rows = self._outbox_rows()
        created = rows.bulk_create(
            [rows.model(**{field: getattr(job, field) for field in KEPT}) for job in jobs],
            batch_size=OUTBOX_BATCH,
        )
        ids = [row.pk for row in created]
        crash_point("push.outbox_written")  # dies: the caller's transaction rolls back
        # Without the ids (SQLite before 3.35 returns none), the hook moves the whole outbox.
        transaction.on_commit(
            lambda: self._after_commit(None if None in ids else ids, then), using=self.database
        )

    def _after_commit(self, ids: list[int] | None,
                      then: Callable[[list[int | None]], None] | None = None) -> None:
        """Move the committed rows to Redis, then call `then` (see _hold); never raise,
        so later on-commit hooks run."""
        crash_point("push.outbox.after_commit")  # committed, not moved: the sweep's
        pushed: dict[int, int | None] = {}
        try:
            if ids is None:
                self.move_outbox()
            else:
                pushed = self._move_outbox_ids(ids)
        except Exception as e:
            what = ("the outbox's jobs" if ids is None
                    else f"{len(ids)} job{'s' * (len(ids) != 1)}")
            logger.warning(
                "Could not send %s to Redis after the commit (%s); they wait in the database "
                "outbox until a worker's sweep sends them.", what, e,
                extra={"action": "outbox_kept", "count": None if ids is None else len(ids)},
            )
            return
        if then is not None and ids is not None:
            then([pushed.get(i) for i in ids])

    def move_outbox(self, ids: Sequence[int] | None = None) -> int:
        """Move outbox rows (these ids, or all) to Redis, oldest first; return how many."""
        if ids is not None:
            return len(self._move_outbox_ids(ids))
        moved = 0
        while batch := self._move_outbox_batch(self._outbox_rows()):
            moved += len(batch)
        return moved

    def _move_outbox_ids(self, ids: Sequence[int]) -> dict[int, int | None]:
        """Move the outbox rows `ids`; return the id in Redis of each row moved here (None:
        not stored, as a duplicate or as pushed before)."""
        pushed: dict[int, int | None] = {}
        for start in range(0, len(ids), OUTBOX_BATCH):
            pushed.update(self._move_outbox_batch(
                self._outbox_rows().filter(pk__in=ids[start : start + OUTBOX_BATCH])))
        return pushed

    def _move_outbox_batch(self, chosen: Any) -> dict[int, int | None]:
        """Delete up to OUTBOX_BATCH rows of `chosen` and push them, in one transaction;
        return each moved row's id in Redis by its own (see _move_outbox_ids)."""
        with transaction.atomic(using=self.database):
            rows = list(chosen.order_by("pk").select_for_update(skip_locked=True)[:OUTBOX_BATCH])
            if not rows:
                return {}
            deleted, _ = self._outbox_rows().filter(pk__in=[row.pk for row in rows]).delete()
            if deleted != len(rows):  # another mover got there first: leave it to them
                transaction.set_rollback(True, using=self.database)
                return {}
            jobs = [
                # The outbox keeps no concurrency key: it is computed again, as at the push.
                with_limit(NewJob(**{field: getattr(row, field) for field in KEPT}))
                for row in rows
            ]
            try:
                # Marked with their rows: if this transaction's commit is lost after the
                # push (a crash, a lost connection), the rows come back and are moved
                # again, and Redis stores each job once all the same.
                ids = self._push_marked(jobs, [_outbox_mark(row) for row in rows])
                crash_point("push.outbox.after_redis_push")  # dies: the rows come back
            except PushNotReplicated as e:
                # On the primary all the same: moved. Pushing them again would double them.
                logger.warning("%s", e, extra={"action": "push_not_replicated"})
                ids = e.ids
        return {row.pk: job_id for row, job_id in zip(rows, ids, strict=True)}

    def _push_marked(self, jobs: Sequence[NewJob], marks: Sequence[str]) -> list[int | None]:
        """Push the outbox's `jobs` with their `marks` (see push's `once`), in order: the
        debounced ones (NewJob.debounce) by PUSH_DEBOUNCED, one at a time."""
        if all(job.debounce is None for job in jobs):
            return self.push(jobs, once=marks)
        ids: list[int | None] = []
        unconfirmed: PushNotReplicated | None = None
        for job, mark in zip(jobs, marks, strict=True):
            try:
                if job.debounce is None:
                    ids += self.push([job], once=[mark])
                else:
                    ids.append(self._push_debounced(job, mark)[0] or None)
            except PushNotReplicated as e:  # on the primary all the same: go on
                ids += e.ids
                unconfirmed = e
        if unconfirmed is not None:
            raise PushNotReplicated(str(unconfirmed), ids)
        return ids

    def sweep_outbox(self) -> int:
        """Move whatever the outbox holds (the workers' sweep); log and go on if that
        fails, since the rows stay for the next sweep."""
        try:
            if not self._outbox_rows().exists():
                return 0
            return self.move_outbox()
        except Exception as e:
            logger.warning(
                "Could not send the database outbox's jobs to Redis (%s); the next sweep "
                "tries again.", e, extra={"action": "outbox_kept"},
            )
            return 0

    # -- claim, heartbeat and wait ----------------------------------------------
    # The CLAIM script, pipelined behind the deletion of the worker's finished jobs
    # (DELETE, or FINISH for jobs of a chain or batch), or the limited claim
    # (limits.py) when a limit may apply; the heartbeat that keeps the claims held;
    # the idle wait, a claim pipelined behind its pop (wait.py).

    @guarded
    def claim(self, queues: Sequence[str], worker: str, limit: int = 1,
              limits: Limits | None = None) -> list[Claim]:
        if not queues or limit < 1:
            return []
        if self._limited(queues, limits):
            return self.settle_and_claim((), queues, worker, limit, limits)
        token = uuid.uuid4().hex
        rows = calls.run_claim(self.client, "claim", [
            self.prefix, *claim_args(token, queues, worker, limit)])
        return claims_from_rows(rows, token)

    @guarded
    def settle_and_claim(
        self, finished: Sequence[Claim], queues: Sequence[str], worker: str, limit: int = 1,
        limits: Limits | None = None,
    ) -> list[Claim]:
        """Delete the finished jobs and claim the next ones in one round trip (a pipeline)."""
        if finished and any_sequenced([c.payload for c in finished]):
            # A head of a sequence ended: deleted with the promotion of the next job of its
            # key (seq_delete.lua), before the claim, which may take that job.
            self.delete(finished)
            return self.claim(queues, worker, limit, limits) if queues and limit >= 1 else []
        limited = self._limited(queues, limits) if queues and limit >= 1 else None
        if limited is not None:
            # A limit may apply: the limited claim (limits.py), after the deletions.
            if finished:
                self.delete(finished)
            token = uuid.uuid4().hex
            rows = calls.run_claim(self.client, "claim_limited", [
                self.prefix,
                *redis_limits.claim_args(AGAIN_WITHIN, token, worker, limit, queues, limited)])
            return claims_from_rows(rows, token)
        if finished and any_marked(finished) and queues and limit >= 1:
            # Jobs of a chain or batch: deleted with what their end brings (FINISH),
            # then the claim, in one round trip.
            name, args, ended = self._finish_step(finished)
            if name == "finish_limited":  # not pipelined: run alone, then the claim
                self.delete(finished)
                return self.claim(queues, worker, limit, limits)
            token = uuid.uuid4().hex
            ran_late: list[int] = []
            steps = [(name, args), ("claim", claim_args(token, queues, worker, limit))]
            if (record := self._history.record_step(finished)) is not None:
                steps.insert(0, record)  # the history's records, read before the deletion
            rows = self._pipeline(steps, ran_late)[-1]
            if ended:
                self._ends_listed()
            if not rows and ran_late == [len(steps) - 2]:
                # Redis did not know FINISH yet (its first use since a restart, a
                # failover or SCRIPT FLUSH): it ran after the CLAIM, which could not
                # find the next links it pushed. Claimed now, or a worker that stops
                # when empty would stop with the rest of the chain waiting.
                return self.claim(queues, worker, limit, limits)
            return claims_from_rows(rows, token)
        if not finished:
            return self.claim(queues, worker, limit, limits)
        if not queues or limit < 1:
            self.delete(finished)
            return []
        token = uuid.uuid4().hex
        steps = [("delete", [value for c in finished for value in (c.id, c.token)]),
                 ("claim", claim_args(token, queues, worker, limit))]
        if (record := self._history.record_step(finished)) is not None:
            steps.insert(0, record)  # the history's records, read before the deletion
        rows = self._pipeline(steps)[-1]
        return claims_from_rows(rows, token)

    @staticmethod
    def _limited(queues: Sequence[str], limits: Limits | None) -> dict | None:
        """The limits of `queues` if a limit may apply to their claim, else None (`limits`:
        those the caller passed, or None to read them through stores.callbacks)."""
        if limits is None:
            limits = limits_of(queues)
        return limits.queues if limits else None

    @guarded
    def heartbeat(self, claims: Sequence[Claim]) -> int:
        if not claims:
            return 0
        pairs = [value for c in claims for value in (c.id, c.token)]
        return int(self._run("heartbeat", pairs))

    def quiet(self) -> bool:
        """This thread's worker looked, found itself quiet (wait.py) and was woken by
        nothing since."""
        return self._waiting.quiet()

    @guarded
    def wait(
        self, queues: Sequence[str], timeout: float, stop: threading.Event, *,
        longest: float | None = None,
    ) -> None:
        """Block on the queues' wake-up lists (Waiting.wait)."""
        self._waiting.wait(queues, timeout, stop, longest=longest)

    @guarded
    def wait_and_claim(
        self, queues: Sequence[str], worker: str, limit: int, timeout: float,
        stop: threading.Event, *, fresh_within: float, longest: float | None = None,
        quiet_after: float = 5.0, limits: Limits | None = None,
    ) -> list[Claim]:
        """Wait as `wait` does, with a CLAIM pipelined behind each blocking pop.

        Redis runs a blocked client's next command as soon as the pop returns, so
        a push wakes the worker with its job already claimed: one round trip from
        the wake-up to the job instead of two. Each CLAIM is dated when its pop
        was sent: a pop blocks at most `fresh_within` seconds (and a server tick).
        """
        if limit < 1 or self._limited(queues, limits) is not None:
            # A limited claim does not ride behind the pop: the worker claims next.
            self._waiting.wait(queues, timeout, stop, longest=longest)
            return []
        return self._waiting.wait_and_claim(queues, worker, limit, timeout, stop,
                                            fresh_within=fresh_within, longest=longest,
                                            quiet_after=quiet_after)

    # -- the sweep ----------------------------------------------------------------

    @guarded
    def requeue_abandoned(self, retry_after: float, reason: str) -> int:
        count, marked = self._run("requeue_abandoned", [
            round(retry_after * 1_000_000), reason, *self._history.abandoned_args()])
        now = us(timezone.now())  # the marked claims below go back due now
        count = int(count)
        crash_point("sweep.after_requeue")
        # Claims that died while moving to the failed list: finish what they started.
        for job_id, token, name, queue, pushed_at in marked:
            claim_id, token = int(job_id), text(token)
            if row_exists(
                self._failed_rows(None), token, claim_id, text(name), text(queue), dt(pushed_at)
            ):
                self._run("seq_delete", ["failed", claim_id, token])
            elif token.startswith(CANCEL_TOKEN):
                self._finish_cancel(claim_id, token)  # cancelled: never runs again
            elif self._run("release", [now, claim_id, token, now, reason, "0"]):
                count += 1
        crash_point("sweep.after_marked")
        # Jobs pushed in transactions that committed while Redis was away.
        self.sweep_outbox()
        self._count_all_ends()  # batch ends a worker died before counting
        self._finish_orphans()  # batches counted to 0 with no callbacks pushed
        return count

    @guarded
    def next_due(self, queues: Sequence[str]) -> datetime | None:
        if not queues:
            return None
        pipe = self.client.pipeline(transaction=True)
        for queue in queues:
            pipe.zcard(self.key("queue", queue, "ready"))
            pipe.zrange(self.key("queue", queue, "delayed"), 0, 0, withscores=True)
        values = pipe.execute()
        if any(values[0::2]):
            return timezone.now()
        earliest = [entries[0][1] for entries in values[1::2] if entries]
        return dt(int(min(earliest))) if earliest else None

    @guarded
    def make_due(self, ids: Iterable[int]) -> int:
        wanted = job_ids(ids)
        if not wanted:
            return 0
        return int(self._run("make_due", [us(timezone.now()), *wanted]))

    # -- settle -----------------------------------------------------------------

    @guarded
    def delete(self, claims: Sequence[Claim]) -> int:
        if not claims:
            return 0
        if any_sequenced([c.payload for c in claims]):
            return self._delete_sequenced(claims)
        record = self._history.record_step(claims)  # the history's records, before the deletion
        if any_marked(claims):
            if record is not None:
                self._run(*record)
            return sum(1 for code in self._finish(claims) if code == 1)
        pairs = [value for c in claims for value in (c.id, c.token)]
        if record is not None:
            codes = self._pipeline([record, ("delete", pairs)])[-1]
        else:
            codes = self._run("delete", pairs)
        return sum(1 for code in codes if int(code) == 1)

    @guarded
    def release(
        self, claim: Claim, available_at: datetime | timedelta, error: str = "", *,
        uncharged: bool = False, started: bool = True, checkpoint: str | None = None,
    ) -> bool:
        now = us(timezone.now())
        how = ("started" if started else "unstarted") if uncharged else ""
        # A delay goes as '+<us>', counted from Redis's own clock (lua/_common.lua).
        if isinstance(available_at, timedelta):
            due: str | int = f"+{available_at // timedelta(microseconds=1)}"
        else:
            due = us(available_at)
        # A retry charged a try, of a queue that keeps history: its attempt goes to the
        # job's attempt log in the same script ('' while history is off).
        logged = "" if uncharged else self._history.attempt_step(claim, error)
        args = [now, claim.id, claim.token, due, error, how, logged]
        if checkpoint is not None:
            args.append(checkpoint)
        return bool(self._run("release", args))

    @guarded
    def fail(self, claim: Claim, error: str) -> int | None:
        """Move the job to the failed list: mark it, write the row, then remove it.

        Each step is safe to repeat: the row is keyed by the claim, so a fail()
        repeated after an error (Redis away before the removal) writes no second
        row and returns the first. See the module docstring for a crash between
        the row and the removal.
        """
        if not self._run("mark_failing", [claim.id, claim.token]):
            return None  # the claim was lost, or the job has left already
        crash_point("fail.after_mark")
        link = self._retried_link(claim.id)
        row = self._write_row_counted(claim, error, link)
        crash_point("fail.after_failed_row")
        kept = self._history.worker_of(claim)  # for its history record (None: not kept)
        (code,) = self._run("seq_delete", ["failed", claim.id, claim.token])
        if int(code) == -1:
            # The claim expired meanwhile and the job went back to its queue: it
            # will run again, so it is not failed after all.
            row.delete()
            return None
        if kept is not None:
            worker, earlier = kept
            self._history.record_failed(claim, error, status_of(error), worker, earlier)
        return row.pk

    # -- the failed list's Redis side (failed.py) -----------------------------------
    # Each row the Redis store writes carries its claim (`claim_token`), so a repeated
    # fail() of one claim finds its row instead of writing a second, and retrying or
    # forgetting a row first finishes the job's removal from Redis if the worker died
    # before doing it: a handled row never brings its job back.

    @guarded
    def retry(self, ids: Iterable[int] | None = None) -> int:
        """See Store.retry; first finishes removals a dead worker left (_after_removals)."""
        return self._after_removals(ids, super().retry)

    @guarded
    def forget(self, ids: Iterable[int] | None = None) -> int:
        """See Store.forget; first finishes removals a dead worker left (_after_removals)."""
        return self._after_removals(ids, super().forget)

    def _after_removals(self, ids: Iterable[int] | None, handle: Callable[[Any], int]) -> int:
        """Retry or forget (`handle`) the failed rows `ids` (None: all), having first
        removed from Redis every job still held under one of their claims, in the same
        database transaction (the rows locked).

        Such a job is left by a worker that died after writing its row: once the row
        is gone, the sweep would find no row and give the job back. Removing it first
        means a row never disappears before its job has.
        """
        ids = None if ids is None else list(ids)
        with transaction.atomic(using=self.database):
            for pairs in marked_claims(self._failed_rows(ids).select_for_update()):
                self._run("seq_delete", ["failed", *pairs])
            crash_point("failed.after_removals")  # dies: the rows stay, their jobs gone
            return handle(ids)

    def _push_retried(self, jobs: Sequence[NewJob], rows: Sequence[Any]) -> list[int | None]:
        """See Store._push_retried: put the retried `jobs` (one per failed row of `rows`)
        in the outbox, in the retry's transaction, and link each to its row once moved;
        return no ids to link now.

        Pushed to Redis at once, a job would stay queued by a retry that does not commit
        (its process killed, an error after the push) while its row stays for another
        retry: one more copy each time. Through the outbox the jobs reach Redis only once
        the rows' deletion commits, each once, and a push no replica confirmed counts as
        moved, logged: its job is on the primary.
        """
        def link(ids: list[int | None]) -> None:
            try:
                self._link_retried([(i, row) for i, row in zip(ids, rows, strict=True) if i])
            except Exception as e:  # the jobs are queued: only their link is missing
                logger.warning("Could not record on the retried jobs the failed job each came "
                               "from (%s).", e, extra={"action": "retry_not_linked"})

        self._hold(jobs, then=link)
        return [None] * len(jobs)

    def _link_retried(self, links: Sequence[tuple[int, Any]]) -> None:
        """See Store._link_retried: record in each retried job's data (its new id, its
        FailedJob) the failed job it came from and that one's error, so a failure of the
        retry shows where it came from."""
        for start in range(0, len(links), CHUNK):
            args = [value for job_id, failed in links[start : start + CHUNK]
                    for value in (job_id, failed.pk, failed.error_summary)]
            self._run("link_retried", args)

    def _retried_link(self, job_id: int) -> dict[str, Any]:
        """The `retried_from_*` FailedJob fields of a job in Redis (none if not a retry)."""
        found, error = self.client.hmget(self.key("job", str(job_id)), *_LINK_FIELDS)
        if not found:
            return {}
        return {"retried_from_id": int(found), "retried_from_error": text(error)}

    def _write_row_counted(self, claim: Claim, error: str,
                           link: dict[str, Any] | None = None) -> Any:
        """Write the failed row of `claim` (failed.write_row) and count it on its
        batch, in one transaction."""
        rows = self._failed_rows(None)
        if not any_marked([claim]):
            return write_row(rows, claim, error, link)
        with transaction.atomic(using=self.database):
            row = write_row(rows, claim, error, link)
            self._count_failed([claim.payload])
        return row

    # -- ordered sequences (sequences.py, lua/_sequence.lua) -------------------------

    def _delete_sequenced(self, claims: Sequence[Claim]) -> int:
        """Delete finished jobs whose claims are still held, some of sequences: each head
        deleted lets the next job of its key go, in the same script (seq_delete.lua)."""
        pairs = [value for c in claims for value in (c.id, c.token)]
        step = ("seq_delete", ["done", *pairs])
        record = self._history.record_step(claims)
        codes = (self._pipeline([record, step])[-1] if record is not None
                 else self._run(*step))
        return sum(1 for code in codes if int(code) == 1)

    def _sequences_forgotten(self, jobs: Sequence[tuple[int, str]]) -> None:
        """See Store._sequences_forgotten: each sequence held by one of them goes on
        (seq_forget.lua)."""
        args = [value for job_id, key in jobs for value in (key, job_id)]
        for start in range(0, len(args), 2 * CHUNK):
            self._run("seq_forget", args[start : start + 2 * CHUNK])

    @guarded
    def held_sequences(self, limit: int = 100) -> list[HeldSequence]:
        return self._held_rows(redis_sequences.held_sequences(self.client, self.prefix, limit))

    @guarded
    def release_sequence(self, key: str) -> bool:
        return bool(self._run("seq_release", [key]))

    # -- schedules ------------------------------------------------------------------
    # Each schedule is a hash `P:schedule:<name>` (last_tick, fired_at: microseconds
    # since the epoch; job_id; paused '1'/'0'; rule_hash), and its name is in the set
    # `P:schedules` (what remove_schedules looks through, rather than a SCAN of every
    # key). SCHEDULE_DEFINE restarts a schedule whose rule changed in one script.
    # SCHEDULE_FIRE checks the cursor, moves it, and pushes the tick's job in one
    # script: Redis runs a script whole or not at all, so the tick and its job move
    # together, and a second scheduler's FIRE for the same tick finds the cursor there
    # and pushes nothing. A scheduler that dies before or after its script leaves
    # either nothing or everything done.

    @guarded
    def schedule_states(self, names: Sequence[str]) -> dict[str, ScheduleState]:
        pipe = self.client.pipeline(transaction=False)
        for name in names:
            pipe.hgetall(self.key("schedule", name))
        return {name: _schedule_state(name, fields)
                for name, fields in zip(names, pipe.execute() if names else [], strict=True)
                if fields}

    @guarded
    def add_schedules(self, names: Sequence[str], since: datetime) -> int:
        pipe = self.client.pipeline(transaction=False)
        for name in names:
            pipe.hsetnx(self.key("schedule", name), "last_tick", us(since))
        if names:
            pipe.sadd(self.key("schedules"), *names)
        return sum(1 for added in (pipe.execute()[:len(names)] if names else []) if added)

    @guarded
    def define_schedules(self, rules: Mapping[str, str], now: datetime) -> list[str]:
        if not rules:
            return []
        pairs = [value for name, rule in rules.items() for value in (name, rule)]
        return [text(name) for name in self._run("schedule_define", [us(now), *pairs])]

    @guarded
    def remove_schedules(self, keep: Sequence[str]) -> int:
        return int(self._run("schedule_remove", list(keep)))

    @guarded
    def fire_schedule(self, fire: ScheduleFire) -> Fired:
        if fire.tick is None and fire.job is None:
            raise ValueError("A ScheduleFire needs a tick, a job, or both.")
        job_args = push_args(str(us(fire.job.pushed_at)), [fire.job]) if fire.job else ["0", 0]
        outcome, job_id = self._run("schedule_fire", [
            fire.name, "" if fire.tick is None else us(fire.tick),
            "push" if fire.job is not None else "advance", "1" if fire.skip_if_running else "0",
            *job_args,
        ])
        outcome = text(outcome)
        return Fired(outcome, int(job_id) or None if outcome == "pushed" else None)

    @guarded
    def pause_schedule(self, name: str, paused: bool, now: datetime) -> ScheduleState:
        flat = self._run("schedule_pause", [name, "1" if paused else "0", us(now)])
        return _schedule_state(name, dict(zip(flat[0::2], flat[1::2], strict=True)))

    # -- reads: for the commands, the admin and the metrics ------------------------

    @guarded
    def queues(self) -> list[str]:
        """Return the names of the queues that ever held a job, sorted."""
        return sorted(text(q) for q in self.client.smembers(self.key("queues")))

    @guarded
    def counts(self, cap: int | None = None) -> dict[str, QueueCounts]:
        now = us(timezone.now())
        names = self.queues()
        pipe = self.client.pipeline(transaction=True)
        for queue in names:
            pipe.zcard(self.key("queue", queue, "ready"))
            pipe.zcount(self.key("queue", queue, "delayed"), "-inf", now)
            pipe.zcount(self.key("queue", queue, "delayed"), f"({now}", "+inf")
            pipe.zcard(self.key("queue", queue, "claimed"))
        values = pipe.execute() if names else []
        result: dict[str, QueueCounts] = {}
        for index, queue in enumerate(names):
            ready, due, later, claimed = values[index * 4 : index * 4 + 4]
            result[queue] = QueueCounts(waiting=ready + due, delayed=later, running=claimed)
        # Redis keeps each count (no row is read); the failed table's are capped.
        return self._with_failed(result, cap)

    @guarded
    def job_states(self, ids: Iterable[int]) -> dict[int, str]:
        wanted = job_ids(ids)
        now = us(timezone.now())
        pipe = self.client.pipeline(transaction=False)
        for job_id in wanted:
            pipe.hmget(self.key("job", str(job_id)), "token", "available_at", "name")
        states = {}
        for job_id, (token, available_at, name) in zip(
                wanted, pipe.execute() if wanted else [], strict=True):
            if name is not None:
                states[job_id] = ("running" if token is not None else
                                  "delayed" if int(available_at or 0) > now else "waiting")
        # A job being moved to the failed list may be in both for a moment: failed wins.
        states.update(self._failed_states(wanted))
        return states

    @guarded
    def running(self, limit: int = 100) -> list[Running]:
        """See Store.running: each with the progress its current attempt saved (read
        with its token, so that a value left by an earlier attempt is not shown)."""
        names = self.queues()
        if not names:
            return []
        pipe = self.client.pipeline(transaction=False)
        for queue in names:
            pipe.zrange(self.key("queue", queue, "claimed"), 0, -1)
        ids = sorted({int(member) for members in pipe.execute() for member in members})[:limit]
        if not ids:
            return []
        pipe = self.client.pipeline(transaction=False)
        for id_ in ids:
            pipe.hmget(self.key("job", str(id_)), _RUNNING_FIELDS)
        found = []
        for id_, row in zip(ids, pipe.execute(), strict=True):
            name, queue, attempts, claimed_by, progress, token = row
            if name is None:
                continue  # settled meanwhile
            found.append(Running(id=id_, name=text(name), queue=text(queue),
                                 attempts=int(attempts or 0), claimed_by=text(claimed_by or b""),
                                 progress=Progress.parse(progress, token)))
        return found

    @guarded
    def minutes(self, since: datetime) -> list[Minute]:
        """See Store.minutes: one hash per minute, `P:minutes:<minute number>`, fields
        `succeeded:<queue>`, `failed:<queue>` and `latency:<queue>` (seconds, see
        `sample_latency`), expiring after `minutes.KEEP`."""
        last = _minute_number(datetime.now(UTC))
        first = max(_minute_number(minute_start(since)),
                    last - int(KEEP.total_seconds() // 60))
        numbers = range(first, last + 1)
        pipe = self.client.pipeline(transaction=False)
        for number in numbers:
            pipe.hgetall(self.key("minutes", str(number)))
        found = []
        for number, fields in zip(numbers, pipe.execute(), strict=True):
            by_queue: dict[str, list[int]] = {}
            latencies: dict[str, float] = {}
            for field, value in fields.items():
                kind, queue = text(field).split(":", 1)
                pair = by_queue.setdefault(queue, [0, 0])
                if kind == "latency":
                    latencies[queue] = float(value)
                else:
                    pair[0 if kind == "succeeded" else 1] += int(value)
            moment = datetime.fromtimestamp(number * 60, UTC)
            found += [Minute(queue, moment, s, f, latencies.get(queue))
                      for queue, (s, f) in sorted(by_queue.items())]
        return found

    @guarded
    def browse_jobs(self, queues: Sequence[str] | None = None,
                    states: Sequence[str] = BROWSED_STATES, window: int = WINDOW) -> Browsed:
        """The admin's Jobs list: up to `window` waiting, delayed and running jobs of
        `queues` (None: all), first in line of each set (browse.py)."""
        return self._browser.browse(queues, states, window)

    @guarded
    def sample_latency(self, minute: datetime, queues: Sequence[str]) -> bool:
        """See Store.sample_latency: the worker that sets `P:latency-sampled:<minute
        number>` (SET NX, expiring) reads the queues' oldest waiting jobs and writes
        `latency:<queue>` fields in the minute's hash; the others stop at the SET."""
        number = _minute_number(minute_start(minute))
        if not self.client.set(self.key("latency-sampled", str(number)), 1, nx=True, ex=180):
            return False
        now = timezone.now()
        ages = {queue: 0.0 for queue in queues}
        ages.update({queue: max((now - due).total_seconds(), 0.0)
                     for queue, due in self.oldest_waiting().items()})
        key = self.key("minutes", str(number))
        pipe = self.client.pipeline(transaction=False)
        for queue, age in sorted(ages.items()):
            pipe.hset(key, f"latency:{queue}", repr(round(age, 3)))
        pipe.expire(key, int(KEEP.total_seconds()))
        pipe.execute()
        return True

    @guarded
    def oldest_waiting(self) -> dict[str, datetime]:
        """See Store.oldest_waiting. A ready set is ordered by priority, then by due time:
        its first member is the oldest of its priority; with several priorities, the
        first member of each is read (a few round trips, as priorities are few)."""
        now = us(timezone.now())
        names = self.queues()
        pipe = self.client.pipeline(transaction=False)
        for queue in names:
            ready = self.key("queue", queue, "ready")
            pipe.zrange(ready, 0, 0, withscores=True)
            pipe.zrange(ready, -1, -1, withscores=True)
            pipe.zrangebyscore(self.key("queue", queue, "delayed"), "-inf", now, 0, 1,
                               withscores=True)
        values = pipe.execute() if names else []
        result: dict[str, datetime] = {}
        for index, queue in enumerate(names):
            first, last, due = values[index * 3 : index * 3 + 3]
            moments = [int(score) for _, score in due]
            if first:
                moments.append(_due_of(first[0][0]))
                if first[0][1] != last[0][1]:
                    moments += self._oldest_per_priority(queue, first[0][1], last[0][1])
            if moments:
                result[queue] = EPOCH + timedelta(microseconds=min(moments))
        return result

    def _oldest_per_priority(self, queue: str, low: float, high: float) -> list[int]:
        """The due time of the first ready member of each priority above `low`."""
        ready = self.key("queue", queue, "ready")
        found: list[int] = []
        score = f"({low}"
        while True:
            entries: Any = self.client.zrangebyscore(ready, score, high, 0, 1, withscores=True)
            if not entries:
                return found
            member, at = entries[0]
            found.append(_due_of(member))
            score = f"({at}"

    # -- fair queues, the live workers' list, the job history's upkeep ---------------

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

    def move_history(self, limit: int = MOVE_CHUNK) -> int:
        """Move up to `limit` of the job history's records listed in Redis to the
        database; return how many were written there (history.py)."""
        return self._history.move(limit)

    def tidy(self) -> int:
        """Move the history's records listed in Redis (those of workers that died too),
        prune the history and the fair turns every few minutes; nothing else piles up
        on Redis."""
        self._history.move_now(every=True)
        return self._history_pruning.maybe() + self._fair.prune_now()

    # -- inspect and manage -------------------------------------------------------

    @guarded
    def add_minutes(self, minutes: Sequence[Minute]) -> None:
        if not minutes:
            return
        pipe = self.client.pipeline(transaction=False)
        keep = int(KEEP.total_seconds())
        for m in minutes:
            key = self.key("minutes", str(_minute_number(m.minute)))
            if m.succeeded:
                pipe.hincrby(key, f"succeeded:{m.queue}", m.succeeded)
            if m.failed:
                pipe.hincrby(key, f"failed:{m.queue}", m.failed)
            pipe.expire(key, keep)
        pipe.execute()

    @guarded
    def save_progress(self, items: Sequence[tuple[Claim, str]]) -> int:
        """See Store.save_progress: a field `progress` of the job's hash, written only
        while the claim's token is the job's (one script for a batch of jobs)."""
        if not items:
            return 0
        args: list[Any] = []
        for claim, stored in items:
            args += [claim.id, claim.token, stored]
        return int(self._run("save_progress", args))

    @guarded
    def checkpoint(self, claim: Claim) -> str:
        """See Store.checkpoint: the `checkpoint` field of the job's hash."""
        found = self.client.hget(self.key("job", str(claim.id)), "checkpoint")
        return text(found) if found else ""

    @guarded
    def save_checkpoint(self, claim: Claim, text: str, *, durable: bool = True) -> bool:
        """See Store.save_checkpoint: written only while the claim's token is the job's."""
        return bool(self._run("save_checkpoint", [claim.id, claim.token, text]))

    def cursor_sender(self, claim: Claim) -> CursorSender | None:
        """See Store.cursor_sender: the script sent on a connection of the pool's, its
        answer read later (cursors.py); on a cluster none (a thread saves them)."""
        if self.cluster:
            return None
        return RedisCursorSender(self.client, self.prefix, claim)

    @guarded
    def clear(self, queue: str | None = None) -> int:
        if queue is not None and (not isinstance(queue, str) or not queue):
            raise ValueError(f"queue is {queue!r}; name a queue, or pass None for every queue.")
        count = int(self._run("clear", [queue or "", self._ends_list()]))
        # The held jobs of sequences (in no set of their queue), and the sequences whose
        # head the clear took, moved on.
        count += int(self._run("seq_clear", [queue or ""]))
        self._count_own_ends()  # its batch jobs, counted as failed
        return count

    def close(self) -> None:
        """Forget the client: the next call looks it up again (its pool stays); on a
        Redis Cluster, after reading the topology again (a worker closes its store
        after an outage: its primary may have failed over)."""
        self._client = None

        self._refresh = self.cluster
    @guarded
    def unclaimed_payloads(self, after: int, limit: int) -> list[tuple[int, str]]:
        """See Store.unclaimed_payloads: the ids of every queue's ready and delayed
        zsets, sorted, then the payloads of the next `limit` of them."""
        pipe = self.client.pipeline(transaction=False)
        names = self.queues()
        for queue in names:
            pipe.zrange(self.key("queue", queue, "ready"), 0, -1)
            pipe.zrange(self.key("queue", queue, "delayed"), 0, -1)
        ids: set[int] = set()
        for members in pipe.execute() if names else []:
            # A ready member is "<available_at>:<id>", a delayed one the id.
            ids.update(int(text(member).rsplit(":", 1)[-1]) for member in members)
        later = sorted(job_id for job_id in ids if job_id > after)
        found: list[tuple[int, str]] = []
        # A whole chunk claimed since the zsets were read gives nothing: the next one is
        # read then, as an empty answer would end the caller's walk (queue_rekey) short.
        for start in range(0, len(later), limit):
            wanted = later[start:start + limit]
            pipe = self.client.pipeline(transaction=False)
            for job_id in wanted:
                pipe.hmget(self.key("job", str(job_id)), "payload", "token")
            for job_id, (payload, token) in zip(wanted, pipe.execute(), strict=True):
                if payload is not None and token is None:
                    found.append((job_id, text(payload)))
            if found:
                break
        return found

    @guarded
    def sample_payloads(self, limit: int) -> list[str]:
        """See Store.sample_payloads: the first `limit` members of each queue's ready
        and delayed zsets (not all ids, as unclaimed_payloads reads), their payloads."""
        names = self.queues()
        if not names:
            return []
        pipe = self.client.pipeline(transaction=False)
        for queue in names:
            pipe.zrange(self.key("queue", queue, "ready"), 0, limit - 1)
            pipe.zrange(self.key("queue", queue, "delayed"), 0, limit - 1)
        ids = {int(text(member).rsplit(":", 1)[-1])
               for members in pipe.execute() for member in members}
        pipe = self.client.pipeline(transaction=False)
        for job_id in sorted(ids):
            pipe.hget(self.key("job", str(job_id)), "payload")
        return [text(found) for found in (pipe.execute() if ids else []) if found is not None]

    @guarded
    def replace_payloads(self, changes: Sequence[tuple[int, str, str]]) -> int:
        if not changes:
            return 0
        return int(self._run("replace_payloads",
                             [value for change in changes for value in change]))

    @guarded
    def listed_history_payloads(self, after: int, limit: int) -> list[tuple[int, str]]:
        """See Store.listed_history_payloads: the records of P:history (history.py)."""
        return self._history.listed(after, limit)

    @guarded
    def replace_listed_history_payloads(self, changes: Sequence[tuple[int, str, str]]
                                        ) -> int:
        return self._history.reseal(changes)

    @guarded
    def sample_listed_history(self, limit: int) -> list[str]:
        return self._history.sample(limit)

    @guarded
    def warnings(self) -> list[str]:
        """A server that evicts keys when full (any `maxmemory-policy` but
        `noeviction`) drops job hashes and the marks that keep a push from running
        twice, without a word: a queue's server wants `noeviction`. The policy is
        read from INFO, which managed services that forbid CONFIG allow. A server that
        keeps nothing on disk loses every job at a restart (unless `ephemeral`)."""
        found = []
        policy = self.client.info("memory").get("maxmemory_policy", "noeviction")
        if policy != "noeviction":
            found.append(
                f"Redis at {describe_redis(self.alias, self.client)} evicts keys when its "
                f"memory is full (maxmemory-policy {policy}): jobs may be lost without a "
                f"word. Set maxmemory-policy to noeviction for the queue's server.")
        if not self.ephemeral:
            lost = persistence_warning(self.client, describe_redis(self.alias, self.client))
            found += [lost] if lost else []
        return found

    @guarded
    def ping(self) -> None:
        from redis.exceptions import RedisError

        client = self.client
        try:
            client.ping()
        except RedisError as e:
            # Any answer but PONG (a refused password, a loading server) counts.
            raise redis_outage(e, self.alias) or StoreUnavailable(
                f"The redis store cannot be reached: {describe_redis(self.alias, client)}: {e}"
            ) from e

    # -- flow control: paused queues, cancels (see flow/) ----------------------------
    # `P:paused` is the set of paused queue names; a running job's hash gets
    # `cancel_requested` when a cancel is asked, which its worker's heartbeat reads.
    #
    # A cancelled waiting job moves to the failed list as a claimed job does in
    # `fail()`, so a crash at any point loses nothing: the CANCEL script takes it out
    # of its queue and holds it under a claim of the cancel's own (token
    # `cancel-...`, marked `failing`); then its row is written to the failed list,
    # keyed by that claim (`FailedJob.claim_token`); then the claim is deleted. If
    # the process dies before the row, the workers' sweep finds the marked claim
    # once `LATERITE_QUEUE_RETRY_AFTER` has passed, with no row, and finishes the
    # cancel (`_finish_cancel`: writes the row, deletes the job); if it dies after
    # the row, the sweep finds the row and deletes the job. A cancelled job never
    # runs again.

    @guarded
    def pause(self, queues: Sequence[str]) -> None:
        if queues:
            self.client.sadd(self.key("paused"), *queues)

    @guarded
    def resume(self, queues: Sequence[str]) -> None:
        if queues:
            self._run("resume", queues)

    @guarded
    def paused_queues(self) -> set[str]:
        return {text(q) for q in self.client.smembers(self.key("paused"))}

    @guarded
    def cancel(self, ids: Iterable[int]) -> dict[int, str]:
        wanted = list(dict.fromkeys(job_ids(ids)))
        if not wanted:
            return {}
        token = f"{CANCEL_TOKEN}{uuid.uuid4().hex}"
        rows = self._run("cancel", [us(timezone.now()), token, *wanted])
        crash_point("cancel.after_hold")  # held under the cancel's claim, no row yet
        result: dict[int, str] = {}
        failed: list[Any] = []
        for row in rows:
            job_id, outcome = int(row[0]), text(row[1])
            result[job_id] = outcome
            if outcome == Outcome.CANCELLED:
                (name, queue, payload, priority, key, attempts, pushed_at, link_id,
                 link_error) = row[2:]
                claim = Claim(id=job_id, name=text(name), queue=text(queue),
                              payload=text(payload), attempts=int(attempts or 0),
                              pushed_at=dt(pushed_at), token=token,
                              unique_key=text(key) or None, priority=int(priority or 0))
                fields = failed_row(claim, reason(False))
                fields["claim_token"] = claim_token(claim)
                if text(link_id):
                    fields.update(retried_from_id=int(link_id),
                                  retried_from_error=text(link_error))
                failed.append(fields)
        if failed:
            # The rows first (one statement), then the jobs leave Redis (see above).
            with transaction.atomic(using=self.database):
                rows = self._failed_rows(None)
                rows.bulk_create([rows.model(**fields) for fields in failed])
                self._count_failed([fields["payload"] for fields in failed])
                self._history.record_cancelled(failed)  # their history records
            crash_point("cancel.after_rows")  # the rows written, the jobs still held
            self._run("seq_delete", ["failed", *[value for fields in failed
                                                 for value in (fields["job_id"], token)]])
        return result

    def _finish_cancel(self, job_id: int, token: str) -> None:
        """Finish a cancel whose process died before the failed row was written (the
        sweep calls this for a marked claim under a cancel token that has no row)."""
        fields = [text(v) if v is not None else None for v in self.client.hmget(
            self.key("job", str(job_id)), "token", "name", "queue", "payload", "priority",
            "unique_key", "attempts", "pushed_at")]
        if fields[0] != token:
            return  # finished meanwhile
        name, queue, payload, priority, key, attempts, pushed_at = fields[1:]
        claim = Claim(id=job_id, name=name or "", queue=queue or "", payload=payload or "",
                      attempts=int(attempts or 0), pushed_at=dt(pushed_at) or timezone.now(),
                      token=token, unique_key=key or None, priority=int(priority or 0))
        self._write_row_counted(claim, reason(False), self._retried_link(job_id))
        self._run("seq_delete", ["failed", job_id, token])

    @guarded
    def cancel_requested(self, claims: Sequence[Claim]) -> set[int]:
        if not claims:
            return set()
        pipe = self.client.pipeline(transaction=False)
        for claim in claims:
            pipe.hmget(self.key("job", str(claim.id)), "token", "cancel_requested")
        found = set()
        for claim, (token, asked) in zip(claims, pipe.execute(), strict=True):
            if asked is not None and token is not None and text(token) == claim.token:
                found.add(claim.id)
        return found

    # -- chains and batches (workflows/) --------------------------------------------
    # A finished job of a workflow leaves Redis by the FINISH script, which in the same
    # step pushes the next link of its chain and appends its batch end to the list of
    # ends of its worker process (the ends of one call as one item; `_ends_list`: each
    # process counts its own, so two never count the same ends at once). The batch's
    # counts live in the database (database/workflows.py) for every store:
    # `_count_ends` counts the listed ends there, the callbacks going to the outbox in
    # the same transaction (moved to Redis at the commit), then takes the ends off the
    # list. A busy worker counts at most every APPLY_EVERY seconds (one commit for many
    # ends), an idle or stopping one at once, and the sweep counts every list (those of
    # workers that died). A crash between the count and the removal leaves the ends
    # listed, and the next count counts them again, which moves nothing: each end is
    # counted once (its BatchEnd row). A job that fails for good is counted in the
    # transaction that writes its failed row (`_write_row_counted`).

    def _ends_list(self) -> str:
        """This process's list of ends: each worker process counts its own, so that two
        never count the same ends at once; the sweep counts those of the dead."""
        return self.key("ended", socket.gethostname(), str(os.getpid()))

    def _finish_step(self, claims: Sequence[Claim]) -> tuple[str, list[Any], bool]:
        """The call of finish.lua for finished jobs, some of a workflow: (script name,
        finish or finish_limited; its arguments after the prefix; whether it lists batch
        completions)."""
        now = str(us(timezone.now()))
        found: list[tuple[Claim, str, list[NewJob]]] = []
        ended = False
        for claim in claims:
            marks = marks_of(claim.payload)
            record = "" if marks.batch is None else f"[{marks.batch[0]},{marks.batch[1]}]"
            ended = ended or bool(record)
            found.append((claim, record, next_links(claim) if marks.chain else []))
        if any(job.concurrency_limit for _, _, links in found for job in links):
            # A next link runs under a concurrency limit: every link carries its key.
            entries = [[str(c.id), c.token, record, [value for job in links for value in (
                *job_fields(job), job.concurrency_key or "",
                "" if job.concurrency_limit is None else str(job.concurrency_limit))]]
                for c, record, links in found]
            return "finish_limited", [now, self._ends_list(), pack(entries)], ended
        entries = [[str(c.id), c.token, record,
                    [value for job in links for value in job_fields(job)]]
                   for c, record, links in found]
        return "finish", [now, self._ends_list(), pack(entries)], ended

    def _finish(self, claims: Sequence[Claim]) -> list[int]:
        """Delete finished jobs, those of a workflow with what their end brings, in one
        script call; return each one's DELETE code (1 deleted, 0 gone, -1 the claim was
        lost)."""
        name, args, ended = self._finish_step(claims)
        codes = self._run(name, args)
        if ended:
            self._ends_listed()
        return [int(code) for code in codes]

    def _ends_listed(self) -> None:
        """This process listed batch ends: count them if its last count is APPLY_EVERY s
        old (one database commit for many ends), in the worker's counting thread where it
        has one (Counter); else when it finds nothing to claim or stops (Store.flush).
        Ends of a worker that died: the sweep's."""
        crash_point("batch.count.after_finish")  # the ends listed, not counted
        self._ends_pending = True
        if time.monotonic() - self._ends_applied < APPLY_EVERY:
            return
        if self._ends_in_background:
            counter = self._ends_counter
            if counter is None or counter.pid != os.getpid():  # none yet in this process
                counter = self._ends_counter = Counter(self._count_own_ends)
            self._ends_applied = time.monotonic()
            counter.due.set()
            return
        self._count_own_ends()

    def _count_own_ends(self) -> int:
        """Count this process's list, one count at a time; note that callbacks may wait."""
        with self._ends_lock:
            taken = self._count_ends()
            if taken:
                self._ends_counted = True
            return taken

    def flush(self) -> bool:
        """Count the ends this process listed and has not counted yet (a worker going
        idle: the batch it worked on may be done); True if some were taken, or counted
        since the last call (their callbacks, pushed after the worker's claim, wait to
        be claimed)."""
        self._history.move_now()  # the records this process listed, to the database
        with self._ends_lock:
            taken = self._count_ends() if self._ends_pending else 0
            counted, self._ends_counted = self._ends_counted, False
        return max(taken, int(counted)) > 0

    def work_in_background(self) -> None:
        """Count the batch ends this process lists in a thread of its own, so that the
        database's part of a count overlaps the jobs that run meanwhile."""
        self._ends_in_background = True

    def _count_ends(self, key: str | None = None) -> int:
        """Count the ends this process's list (or list `key`) holds on their batches;
        return how many were taken off it. Never raises: what is not counted now is
        counted by the next call."""
        own = key is None
        key = self._ends_list() if key is None else key
        taken = 0
        if own:
            self._ends_applied = time.monotonic()
            self._ends_pending = False
        try:
            while True:
                records = self.client.lrange(key, 0, ENDS_CHUNK - 1)
                if not records:
                    return taken
                ends = []
                for raw in records:
                    line = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)
                    # "[batch,position]" (DROP_BATCH), or several separated by spaces
                    # (FINISH); "[batch,position,1]" a failed one (CLEAR)
                    for record in line.split(" "):
                        try:
                            batch, position, *failed = record[1:-1].split(",")
                            ends.append(End(int(batch), int(position), failed == ["1"]))
                        except ValueError:
                            logger.error("An unreadable batch end in Redis was dropped: %r",
                                         record)
                with transaction.atomic(using=self.database):
                    count_ends(self.database, ends, self._hold)
                crash_point("batch.count.after_count")  # counted, still listed
                # What was read is taken off; if another process (the sweep, counting a
                # live worker's list at the same moment) took some first, by value.
                self._run("take_completions", [key, b"\n".join(
                    r if isinstance(r, bytes) else str(r).encode() for r in records)])
                taken += len(records)
                if len(records) < ENDS_CHUNK:
                    return taken
        except Exception as e:
            if own:
                self._ends_pending = True
            logger.warning("Could not count the ends of batch jobs yet (%s); the next sweep "
                           "tries again.", e, extra={"action": "batch_ends_kept"})
            return taken

    def _count_all_ends(self) -> int:
        """Count the ends of every process's list (the sweep: those of workers that died
        before counting theirs), and forget the empty lists; return how many were taken."""
        try:
            keys = [k.decode() if isinstance(k, bytes) else str(k)
                    for k in self.client.smembers(self.key("ended-lists"))]
        except Exception:
            return 0
        taken = sum(self._count_ends(key) for key in keys)
        if keys:
            with contextlib.suppress(Exception):
                self._run("forget_empty_lists", keys)
        return taken

    def _finish_orphans(self) -> int:
        """The sweep's look for batches counted down to 0 whose callbacks were not pushed
        (database/workflows.py, finish_settled): the same rule as the database store's,
        though here each count pushes them itself, so it finds none in the usual course."""
        return finish_settled(self.database, None, self._hold)

    def _count_failed(self, payloads: Sequence[str]) -> None:
        """Count jobs moved to the failed list on their batches (in the caller's
        transaction)."""
        count_ends(self.database, ends_of_payloads(payloads, failed=True), self._hold)

    @guarded
    def drop_batch(self, batch_id: int) -> int:
        """Remove the waiting and delayed jobs of cancelled batch `batch_id`, counting
        each as ended; return how many. One script call per DROP_CHUNK jobs looked at,
        so Redis is never held long; a job that moves meanwhile is dropped by the worker
        that claims it (workflows.cancelled)."""
        removed = 0
        for raw in self.client.smembers(self.key("queues")):
            queue = raw.decode() if isinstance(raw, bytes) else str(raw)
            for kind in ("ready", "delayed"):
                start = 0
                while True:
                    gone, seen = self._run("drop_batch", [int(batch_id), queue, kind, start,
                                                          DROP_CHUNK, self._ends_list()])
                    removed += int(gone)
                    if int(seen) < DROP_CHUNK:
                        break
                    start += DROP_CHUNK - int(gone)
        self._count_own_ends()
        return removed
