"""The store interface: where jobs wait. Each method is one storage operation.

The worker's rules (tries, backoff, timeouts) live in the worker; a store only
keeps jobs and settles claims. Every method that settles a claim acts only
while the claim's token is still current, so a worker that lost its claim
cannot settle the job a second time.
"""

from __future__ import annotations

import abc
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from django.db import transaction

from ..core.checkpoint import CursorSender
from ..core.fairness import TOP_KEYS, WaitingByKey
from ..core.sequences import HeldSequence
from ..core.values import Claim, NewJob, QueueCounts, Running, job_ids
from ..exceptions import StoreUnavailable
from .errors import database_outage, guarded
from .failed_list import FailedList

if TYPE_CHECKING:
    from ..core.limits import Limits
    from ..core.minutes import Minute
    from ..core.workers import WorkerInfo
    from .schedule_state import Fired, ScheduleFire, ScheduleState

__all__ = ["QUIET_LONGEST", "Claim", "NewJob", "QueueCounts", "Running", "Store", "job_ids"]

# The longest a quiet worker (Store.quiet) goes without a look: for what changes
# without waking anyone (a row written by hand, an outbox row left by a push that
# could not reach Redis).
QUIET_LONGEST = 300.0


class Store(FailedList, abc.ABC):
    """Where jobs wait; subclasses keep them in the database or in Redis.

    The failed list lives in the database (`FailedJob`) for every store, so
    the failed-list operations are implemented here once.
    """

    # Whether a push inside transaction.atomic() commits with the caller's data
    # by itself (True for the database store on the same alias).
    transactional_push: bool = False

    def __init__(self, *, database: str = "default") -> None:
        self.database = database

    # -- jobs -----------------------------------------------------------------

    @abc.abstractmethod
    def push(self, jobs: Sequence[NewJob]) -> list[int | None]:
        """Store `jobs` in one round trip; return each one's id, or None if dropped
        as a duplicate of a waiting job with the same unique key."""

    @abc.abstractmethod
    def push_debounced(self, job: NewJob) -> tuple[int, bool]:
        """Store debounced job `job` (NewJob.debounce, its key in `unique_key`) in one
        atomic step: replace the waiting job that holds the key (the new arguments, due
        `debounce` seconds from the store's now but not past that job's deadline), else
        store it as a new job; return (id, whether a waiting job was replaced)."""

    @guarded
    def push_on_commit(self, jobs: Sequence[NewJob]) -> None:
        """Push `jobs` once the transaction open on this store's database commits, and
        not at all if it rolls back (stores whose push cannot join it).

        The jobs' ids are not known here. The Redis store overrides this to keep
        the jobs in a database outbox meanwhile.
        """
        transaction.on_commit(lambda: self._push_any(jobs), using=self.database)

    def _push_any(self, jobs: Sequence[NewJob]) -> list[int | None]:
        """Push `jobs`, the debounced ones (NewJob.debounce) by `push_debounced`, in order;
        return each one's id (None: dropped as a duplicate)."""
        if all(job.debounce is None for job in jobs):
            return self.push(jobs)
        return [self.push_debounced(job)[0] if job.debounce is not None
                else self.push([job])[0] for job in jobs]

    @abc.abstractmethod
    def claim(self, queues: Sequence[str], worker: str, limit: int = 1,
              limits: Limits | None = None) -> list[Claim]:
        """Claim up to `limit` due jobs, the first listed queue first, oldest first.

        `limits`: the limits the claim applies (the worker's, read from the settings and
        the registry: flow.limits.limits_of); None reads them through stores.callbacks.
        """

    def settle_and_claim(
        self, finished: Sequence[Claim], queues: Sequence[str], worker: str, limit: int = 1,
        limits: Limits | None = None,
    ) -> list[Claim]:
        """Delete `finished` jobs (claims still held) and claim the next ones.

        Stores that can do both in one round trip override this.
        """
        self.delete(finished)
        return self.claim(queues, worker, limit, limits)

    @abc.abstractmethod
    def requeue_abandoned(self, retry_after: float, reason: str) -> int:
        """Return claims not refreshed for `retry_after` seconds to their queues, due at once.

        The seconds are counted by the store's own clock, the one that dated the claims
        and their heartbeats (never the caller's: a host whose clock runs ahead would
        take live claims for abandoned).

        A claim at position 0 of its batch started, so it is charged a try; one
        at a later position may never have started, so it is not (`uncounted`),
        though it stays counted in `attempts`: a job that did start runs next under
        a new attempt number. Each keeps its `available_at`, so it is first in
        line (position 0) when claimed again. Also pushes the callbacks of batches
        that dead workers counted down to 0 without pushing them
        (workflows.counts.finish_settled).
        """

    @abc.abstractmethod
    def make_due(self, ids: Iterable[int]) -> int:
        """Make these waiting or delayed jobs due now (the admin's *Run now*) and wake
        the workers; return how many. Running jobs are left alone, and jobs already
        due keep their place in line."""

    def next_due(self, queues: Sequence[str]) -> datetime | None:
        """When the next unclaimed job of `queues` is due (a past moment if one is due
        already); None if none waits. `queue_work --wait-delayed` reads it."""
        raise NotImplementedError

    # -- schedules (schedule_state.py) ---------------------------------------------

    @abc.abstractmethod
    def schedule_states(self, names: Sequence[str]) -> dict[str, ScheduleState]:
        """The state of each of the schedules `names` that has one, by name."""

    @abc.abstractmethod
    def add_schedules(self, names: Sequence[str], since: datetime) -> int:
        """Give each of `names` without a state one whose cursor is `since` (no tick at
        or before it fires); return how many were added. Safe to race."""

    @abc.abstractmethod
    def define_schedules(self, rules: Mapping[str, str], now: datetime) -> list[str]:
        """Keep `rules[name]` (Schedule.rule_hash) with each of these schedules' states.
        One kept with another rule (or REMOVED) restarts: its cursor moves forward to
        `now`, so no tick of before the change fires. One kept with none (by an older
        version) takes it and keeps its cursor. Return the names restarted. Safe to race."""

    @abc.abstractmethod
    def remove_schedules(self, keep: Sequence[str]) -> int:
        """Mark every schedule state but those of `keep` as REMOVED, so that one put back
        in the settings starts from its return; return how many were marked."""

    @abc.abstractmethod
    def fire_schedule(self, fire: ScheduleFire) -> Fired:
        """Move a schedule's cursor to a tick and push its job, as one atomic step
        (see ScheduleFire); the cursor only ever moves forward."""

    @abc.abstractmethod
    def job_states(self, ids: Iterable[int]) -> dict[int, str]:
        """The state of each of these jobs that is still somewhere: "waiting", "delayed",
        "running" or "failed"; a job that succeeded (or was deleted) is left out. The
        outcome of a schedule's last job (queue_schedules, the admin)."""

    @abc.abstractmethod
    def pause_schedule(self, name: str, paused: bool, now: datetime) -> ScheduleState:
        """Pause or resume a schedule (adding its state if it has none); a resumed
        schedule fires no tick at or before `now`. Return its state."""

    @abc.abstractmethod
    def heartbeat(self, claims: Sequence[Claim]) -> int:
        """Refresh the claims still held; return how many were."""

    @abc.abstractmethod
    def delete(self, claims: Sequence[Claim]) -> int:
        """Delete finished jobs whose claims are still held; return how many."""

    @abc.abstractmethod
    def release(
        self, claim: Claim, available_at: datetime | timedelta, error: str = "", *,
        uncharged: bool = False, started: bool = True, checkpoint: str | None = None,
    ) -> bool:
        """Give the job back to its queue, due at `available_at`; False if the claim was lost.

        A timedelta is counted from the store's now by its own clock (a retry's backoff):
        a worker whose clock runs ahead or behind neither holds the job back longer nor
        lets it jump ahead of older ones. A datetime is a moment already stored (a job
        given back where it was in line).

        With `uncharged`, the claim is not charged a try: a worker stopped the job
        before it finished. It still counts in `attempts` (`Claim.uncounted` keeps it
        off the tries), so the job runs next under a new number. With `started`
        false too, the job never started under this claim: its attempt is taken back.
        With `checkpoint`, the job's checkpoint becomes that text in the same step (a
        snooze counted).
        """

    @abc.abstractmethod
    def fail(self, claim: Claim, error: str) -> int | None:
        """Move the job to the failed list; return the FailedJob id, None if the claim was lost."""

    @abc.abstractmethod
    def counts(self, cap: int | None = None) -> dict[str, QueueCounts]:
        """Return the counts of every queue that has jobs, failed ones included.

        With `cap`, a count the store would read row by row stops at `cap`: it is
        then `cap` and its state is in the queue's `capped` (there are more), so the
        cost stays bounded on a big table (the admin's summary). Counts the store
        keeps as such (Redis's waiting and running) are exact whatever the cap."""

    def oldest_waiting(self) -> dict[str, datetime]:
        """For each queue with a waiting job (due, not claimed), when the one waiting
        longest became due. Read at every metrics scrape: one cheap query."""
        raise NotImplementedError

    def save_progress(self, items: Sequence[tuple[Claim, str]]) -> int:
        """Store each (claim, progress text) on its job if the claim is still held (see
        `progress`); return how many were. Called by the worker's heartbeat thread."""
        raise NotImplementedError

    def checkpoint(self, claim: Claim) -> str:
        """The checkpoint text saved with the claimed job ("" if none; see
        core.checkpoint). Read once per run by a job that iterates, steps or snoozes."""
        raise NotImplementedError

    def save_checkpoint(self, claim: Claim, text: str, *, durable: bool = True) -> bool:
        """Store `text` as the job's checkpoint if the claim is still held; False if it
        was lost (another run owns the job now, and what it saved stays).

        Not `durable` (a cursor of cx.iterate): a store may commit it without waiting
        for its disk (PostgreSQL: no WAL flush waited for, as claims commit); a crash of
        the store's server itself may then lose the last saves, and their chunks are
        done again, as after any crash. A step's result is saved durable."""
        raise NotImplementedError

    def cursor_sender(self, claim: Claim) -> CursorSender | None:
        """What saves `claim`'s cursors of `cx.iterate` without waiting between chunks
        (the save sent on a connection of its own, its answer read before the next
        chunk's items are handed on), or None: a thread of the worker's then saves them
        (resumable.CursorWriter)."""
        return None

    def joins_callers_transaction(self) -> bool:
        """Whether a write of this store from the calling thread now would join its open
        transaction (a database store's connection inside an atomic block): a cursor of
        `cx.iterate` is then saved in that thread, with the job's work, not behind it."""
        return False

    def running(self, limit: int = 100) -> list[Running]:
        """The running (claimed) jobs, oldest id first, at most `limit`, each with the
        progress its current attempt reported (`queue_status`)."""
        raise NotImplementedError

    def add_minutes(self, minutes: Sequence[Minute]) -> None:
        """Add a worker's counts per queue and minute to the stored ones (see `minutes`);
        counts older than `minutes.KEEP` are let go."""
        raise NotImplementedError

    def minutes(self, since: datetime) -> list[Minute]:
        """The stored counts of the minutes from `since` on, by minute then queue, each
        with the queue's latency sampled in it (None if none was)."""
        raise NotImplementedError

    def sample_latency(self, minute: datetime, queues: Sequence[str]) -> bool:
        """Record for `minute` the latency of `queues` and of every queue with a due
        waiting job: how long its oldest due waiting job has waited (0 if none waits).
        Once per minute: if a worker already sampled `minute`, do nothing and return
        False (workers call it from their heartbeat about once a minute each)."""
        raise NotImplementedError

    @abc.abstractmethod
    def clear(self, queue: str | None = None) -> int:
        """Delete every waiting and running job (of `queue`, or of all); return how many."""

    @abc.abstractmethod
    def ping(self) -> None:
        """Raise StoreUnavailable if the store cannot be reached."""

    def warnings(self) -> list[str]:
        """What the store's server is set to do that may lose jobs, one sentence each;
        `queue_work` says them once as it starts. None by default."""
        return []

    def tidy(self) -> int:
        """Remove what slows the store down or piles up once enough of it has (PostgreSQL's
        dead rows; the fair turns no key needs, see prune_fair_turns); return how much was
        removed, 0 when nothing was due. Cheap to call often: the workers call it every
        few seconds."""
        return 0

    def fair_waiting(self, top: int = TOP_KEYS) -> dict[str, WaitingByKey]:
        """For each fair queue with a waiting job of a fair key (core/fairness.py), its
        `top` keys with the most waiting jobs (due or not; NO_KEY for the jobs pushed
        without a key) and how many keys wait in all (the admin, `queue_status`)."""
        return {}

    def prune_fair_turns(self) -> int:
        """Forget the turns of the fair keys no waiting job needs any more, so that they
        do not pile up, without changing any job's turn to come; return how many were
        forgotten. `tidy` calls it every PRUNE_EVERY seconds."""
        return 0

    def held_sequences(self, limit: int = 100) -> list[HeldSequence]:
        """The sequences whose head failed for good and holds the rest (core/sequences.py),
        by key, at most `limit` (the admin, `queue_status`)."""
        return []

    def release_sequence(self, key: str) -> bool:
        """Let the held sequence `key` go on: its next job is due, its failed head stays
        on the failed list (retried, it runs after those waiting now); whether it was
        held. Forgetting the failed head does the same and drops it."""
        return False

    def _sequences_forgotten(self, jobs: Sequence[tuple[int, str]]) -> None:
        """Failed jobs of sequences forgotten, (job id while queued, key) each, in the
        forget's transaction: a sequence held by one of them goes on."""

    def quiet(self) -> bool:
        """Whether this thread's idle worker may wait on without a sweep or a claim: its
        store's last look found no job claimed anywhere and none of its queues' jobs
        due, and nothing has woken it since (no push, no delayed job fallen due).
        Then nothing can have been claimed, so no worker can have died holding a job.
        Stores that cannot tell say False (the default): their idle workers sweep
        and claim at every wake-up."""
        return False

    def wait(
        self, queues: Sequence[str], timeout: float, stop, *, longest: float | None = None
    ) -> None:
        """Block until a job may be due on `queues`, `timeout` passes or `stop` is set.

        `stop` is a threading.Event. Stores that can be woken (LISTEN/NOTIFY,
        blocking pops) override this: a push, and every call that puts a job back
        in line, wakes them, so they may wait up to `longest` instead of `timeout`
        (never past the next delayed job's time), and an idle worker then asks
        nothing of its store. The default sleeps `timeout`.
        """
        stop.wait(timeout)

    def wait_and_claim(
        self, queues: Sequence[str], worker: str, limit: int, timeout: float, stop, *,
        fresh_within: float, longest: float | None = None, quiet_after: float = 5.0,
        limits: Limits | None = None,
    ) -> list[Claim]:
        """Wait as `wait` does; a store that can claim in the round trip that wakes it
        returns what it claimed there (as `claim` would), saving the worker one.

        Such a claim may be dated up to `fresh_within` seconds (and a server tick)
        before it is made; the worker keeps that well under `retry_after`. A store
        whose look for `quiet` costs more than its waits may wait until the worker
        has been idle `quiet_after` seconds before it looks. The default waits and
        claims nothing: the worker claims next, as after `wait`.
        """
        self.wait(queues, timeout, stop, longest=longest)
        return []

    # -- flow control (flow/) -----------------------------------------------------

    @abc.abstractmethod
    def pause(self, queues: Sequence[str]) -> None:
        """Mark `queues` paused: workers leave them out of their claims."""

    @abc.abstractmethod
    def resume(self, queues: Sequence[str]) -> None:
        """Unmark paused `queues` and wake the workers waiting on them."""

    @abc.abstractmethod
    def paused_queues(self) -> set[str]:
        """Return the names of the paused queues."""

    @abc.abstractmethod
    def cancel(self, ids: Iterable[int]) -> dict[int, str]:
        """Cancel jobs; return each id's `flow.cancel.Outcome` word.

        A waiting or delayed job moves to the failed list now ("cancelled"); a
        running one is marked, for its worker's heartbeat to see ("asked"); an id
        no job has any more is left alone ("finished").
        """

    @abc.abstractmethod
    def cancel_requested(self, claims: Sequence[Claim]) -> set[int]:
        """Return the ids of those held `claims` whose cancel was asked."""

    def drop_batch(self, batch_id: int) -> int:
        """Remove the jobs of cancelled batch `batch_id` not started yet, counting each as
        ended (workflows.batches.cancel_batch); return how many. One that escapes (a
        job claimed meanwhile) is dropped, unrun, by the worker that claimed it."""
        raise NotImplementedError

    def flush(self) -> bool:
        """Finish what this process put off to do in bulk (the Redis store: count the
        batch ends it listed); return True if that may have pushed jobs (a batch's
        callbacks). The worker calls it when it finds nothing to claim (and claims
        again if so) and as it stops; cheap when there is nothing to do."""
        return False

    def work_in_background(self) -> None:
        """This process is a worker on connections of its own (`queue_work`, not
        `testing.run_jobs` in the caller's transaction): the store may do what it puts
        off (see `flush`) in a thread of its own. Nothing to do for most stores."""

    def close(self) -> None:
        """Release whatever connections this store holds for the calling thread."""

    # -- the live workers' list (core.workers) -----------------------------------

    def beat_worker(self, info: WorkerInfo) -> None:
        """Write worker `info`'s entry (created at its first beat), its beat dated by
        the store's clock; now and then remove the entries lost longer than
        `core.workers.KEEP_LOST`. Called at the worker's start, then with its
        heartbeat: one write per RETRY_AFTER / 3 seconds, whatever its jobs."""
        raise NotImplementedError

    def remove_worker(self, worker_id: str) -> None:
        """Remove the entry of worker `worker_id` (it stops cleanly)."""
        raise NotImplementedError

    def workers(self) -> list[WorkerInfo]:
        """Every worker's entry, lost ones included, by host then pid, each with its
        `age` (seconds since its last beat, by the store's clock)."""
        raise NotImplementedError

    # -- shared by the stores ---------------------------------------------------

    def _outage(self, error: BaseException) -> StoreUnavailable | None:
        """The StoreUnavailable to raise for a backend `error`, or None (see errors.guarded)."""
        return database_outage(error, self.database)

    def _with_failed(self, counts: dict[str, QueueCounts], cap: int | None = None
                     ) -> dict[str, QueueCounts]:
        """The counts of `counts`' non-empty queues plus every queue's failed jobs, by
        name (each counted up to `cap`, if given: see `counts`)."""
        result = {queue: c for queue, c in counts.items() if c.total}
        for queue, failed in self.failed_counts(cap).items():
            found = result.setdefault(queue, QueueCounts())
            found.failed = failed if cap is None else min(failed, cap)
            if cap is not None and failed > cap:
                found.capped.add("failed")
        return dict(sorted(result.items()))

    # -- re-encryption (queue_rekey) --------------------------------------------

    def sample_payloads(self, limit: int) -> list[str]:
        """The payloads of at most `limit` waiting or delayed jobs (the first by id), read
        in one bounded look: what the check of retired keys samples."""
        return [text for _, text in self.unclaimed_payloads(0, limit)]

    def unclaimed_payloads(self, after: int, limit: int) -> list[tuple[int, str]]:
        """(id, payload) of up to `limit` jobs not claimed (waiting, delayed) with an
        id above `after`, by id: what queue_rekey reads, a chunk at a time."""
        raise NotImplementedError

    def replace_payloads(self, changes: Sequence[tuple[int, str, str]]) -> int:
        """Set the payload of each job (id, old, new) that is still unclaimed and still
        holds `old` (one claimed or replaced meanwhile is left as it is); return how
        many were set."""
        raise NotImplementedError

    def listed_history_payloads(self, after: int, limit: int) -> list[tuple[int, str]]:
        """(position, payload) of up to `limit` history records the store lists before
        they are moved to the history table (the Redis store's P:history), after
        position `after`, by position: what queue_rekey reads. None on a store that
        writes its records to the table itself."""
        return []

    def replace_listed_history_payloads(self, changes: Sequence[tuple[int, str, str]]
                                        ) -> int:
        """Set the payload of each listed history record (position, old, new) still
        listed and still holding `old` (one moved meanwhile is left as it is); return
        how many were set."""
        return 0

    def sample_listed_history(self, limit: int) -> list[str]:
        """The payloads of the first `limit` listed history records (see
        listed_history_payloads): what the check of retired keys samples."""
        return []
