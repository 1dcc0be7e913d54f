"""The database stores' ordered sequences (core/sequences.py): of the jobs of one key,
only the head may be claimed; the others are pushed held (due at HELD_AT, never
claimed) and listed in `laterite_sequence_held`, and each end of the head promotes the
next one, in push order (by job id).

Every step runs in the transaction of what brings it (the push, the head's delete, its
fail, a cancel, a forget or retry from the failed list, a clear) and first locks its
key's `laterite_sequence` row: PostgreSQL's INSERT ... ON CONFLICT DO UPDATE (or
FOR UPDATE) holds the row lock to the commit, SQLite's first write its write lock. So a
push and the head's settle never both find the key without a head, and two keys are
always locked in sorted order (no two transactions wait for each other in a circle).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from django.utils import timezone

from ...core.sequences import HELD_AT, HeldSequence, SequenceMark, sequence_of
from ...core.values import NewJob
from .sql import TABLE, aware

__all__ = ["Sequences"]

HEADS = "laterite_sequence"
HELD = "laterite_sequence_held"

# Params: key. The key's row, made if missing, locked; its head and whether it failed.
TAKE = (f"INSERT INTO {HEADS} (key, head_id, failed) VALUES (%s, NULL, FALSE) "
        f"ON CONFLICT (key) DO UPDATE SET key = excluded.key RETURNING head_id, failed")
# Params: key. The key's row if any (locked on PostgreSQL by the dialect's suffix).
LOCK = f"SELECT head_id, failed FROM {HEADS} WHERE key = %s"
# Params: head id, failed, key.
SET_HEAD = f"UPDATE {HEADS} SET head_id = %s, failed = %s WHERE key = %s"
# Params: key.
DROP = f"DELETE FROM {HEADS} WHERE key = %s"
# Params: held time, job id. A pushed job made held (in its push's transaction).
HOLD_JOB = f"UPDATE {TABLE} SET available_at = %s WHERE id = %s"
# Params: job id, key, due.
ADD_HELD = f"INSERT INTO {HELD} (job_id, key, due) VALUES (%s, %s, %s)"
# Params: key. The next held job of the key, in push order.
NEXT = f"SELECT job_id, due FROM {HELD} WHERE key = %s ORDER BY job_id LIMIT 1"
# Params: job id.
UNHOLD = f"DELETE FROM {HELD} WHERE job_id = %s"
# Params: due, job id, held time. The held job made due; its queue (none: it is gone).
PROMOTE = (f"UPDATE {TABLE} SET available_at = %s WHERE id = %s AND token IS NULL "
           f"AND available_at = %s RETURNING queue")
# The sequences whose head is neither waiting, running nor failed (a clear took it).
ORPHANED = (f"SELECT key, head_id FROM {HEADS} s WHERE NOT failed AND head_id IS NOT NULL "
            f"AND NOT EXISTS (SELECT 1 FROM {TABLE} j WHERE j.id = s.head_id)")
# The held jobs whose job is gone (a clear, a cancel).
GONE_HELD = (f"DELETE FROM {HELD} WHERE NOT EXISTS (SELECT 1 FROM {TABLE} j "
             f"WHERE j.id = {HELD}.job_id)")
# Params: limit. The held sequences: key, failed head's job id, jobs waiting behind it.
HELD_SEQUENCES = (f"SELECT s.key, s.head_id, (SELECT count(*) FROM {HELD} h "
                  f"WHERE h.key = s.key) FROM {HEADS} s WHERE s.failed "
                  f"ORDER BY s.key LIMIT %s")


class Sequences:
    """The sequence steps of one transaction, through `execute` (statement, params,
    fetch) -> (rows, rowcount); `ts` writes a datetime for the database; `lock` is the
    row lock's suffix (" FOR UPDATE" on PostgreSQL); `woken(queue)` is called for each
    queue a job was promoted in (PostgreSQL notifies its idle workers)."""

    # Params: id, token. A finished head deleted if its claim still holds.
    DELETE = f"DELETE FROM {TABLE} WHERE id = %s AND token = %s"

    def __init__(self, execute: Callable[..., tuple[list, int]], ts: Callable[[Any], Any],
                 lock: str, woken: Callable[[str], None]) -> None:
        self._execute = execute
        self._ts = ts
        self._lock = lock
        self._woken = woken
        self._held = ts(HELD_AT)

    # -- push -----------------------------------------------------------------------

    def placed(self, jobs: Sequence[NewJob], push: Callable[[Sequence[NewJob]],
                                                             list[int | None]]
               ) -> list[int | None]:
        """Push `jobs` (through `push`, in the open transaction), those of a sequence
        each the head of its key if it has none, else held behind it."""
        marks = [sequence_of(job.payload) for job in jobs]
        heads: dict[str, list[Any]] = {}
        for key in sorted({mark.key for mark in marks if mark is not None}):
            rows, _ = self._execute(TAKE, [key], True)
            heads[key] = [rows[0][0], bool(rows[0][1]), False]  # head, failed, changed
        ids = push(jobs)
        for job, mark, job_id in zip(jobs, marks, ids, strict=True):
            if mark is None or job_id is None:
                continue
            state = heads[mark.key]
            head, failed = state[0], state[1]
            if head is None or (failed and mark.retry_of is not None
                                and mark.retry_of == head):
                state[:] = [job_id, False, True]  # the head (a retry of the failed head)
            else:
                self._execute(HOLD_JOB, [self._held, job_id])
                self._execute(ADD_HELD, [job_id, mark.key, self._ts(job.available_at)])
        for key, (head, failed, changed) in heads.items():
            if changed:
                self._execute(SET_HEAD, [head, failed, key])
            elif head is None:
                self._execute(DROP, [key])  # its jobs were all duplicates
        return ids

    # -- ends of a job --------------------------------------------------------------

    def ended(self, ends: Iterable[tuple[int, SequenceMark, bool]]) -> None:
        """Jobs of sequences that left the job table: (job id, mark, failed for good).
        A head that ran, or failed in a sequence that goes on, lets the next one go; a
        head failed in a sequence that waits holds it."""
        for job_id, mark, failed in sorted(ends, key=lambda e: (e[1].key, e[0])):
            # A held job cancelled just leaves (never a head: its key's row untouched).
            if failed and self._execute(UNHOLD, [job_id])[1]:
                continue
            if failed and not mark.go_on:
                self.hold(mark.key, job_id)
            else:
                self.advance(mark.key, job_id)

    def hold(self, key: str, job_id: int) -> None:
        """The head `job_id` of `key` failed for good: the rest wait behind it."""
        state = self._locked(key)
        if state is not None and state[0] == job_id:
            self._execute(SET_HEAD, [job_id, True, key])

    def advance(self, key: str, job_id: int | None) -> bool:
        """If `job_id` is the head of `key` (None: whatever it is), promote the next held
        job (made due, the new head), or end the sequence if none is left; whether it
        was the head."""
        state = self._locked(key)
        if state is None or (job_id is not None and state[0] != job_id):
            return False
        self._next(key)
        return True

    def _next(self, key: str) -> None:
        """Promote the next held job of `key` still there, or drop the key's row."""
        now = timezone.now()
        while True:
            rows, _ = self._execute(NEXT, [key], True)
            if not rows:
                self._execute(DROP, [key])
                return
            job_id, due = rows[0]
            due = max(aware(due), now)
            # The job's row first, then its held row: in the order a cancel of it takes
            # them, so the two never wait for each other in a circle.
            found, _ = self._execute(PROMOTE, [self._ts(due), job_id, self._held], True)
            self._execute(UNHOLD, [job_id])
            if found:  # else cancelled or cleared meanwhile: the next one
                self._execute(SET_HEAD, [job_id, False, key])
                self._woken(found[0][0])
                return

    def _locked(self, key: str) -> tuple[int | None, bool] | None:
        rows, _ = self._execute(LOCK + self._lock, [key], True)
        return None if not rows else (rows[0][0], bool(rows[0][1]))

    # -- repairs and the operator's release -------------------------------------------

    def orphans(self) -> int:
        """Move on every sequence whose head left without its settle (a clear); return
        how many."""
        self._execute(GONE_HELD, [])
        rows, _ = self._execute(ORPHANED, [], True)
        for key, head in sorted(rows):
            self.advance(key, head)
        return len(rows)

    def not_held(self, ids: list[int]) -> list[int]:
        """Those of `ids` not held behind their sequence's head (make_due's: a held job
        is due in its sequence's turn alone)."""
        if not ids:
            return ids
        rows, _ = self._execute(
            f"SELECT job_id FROM {HELD} WHERE job_id IN ({', '.join(['%s'] * len(ids))})",
            ids, True)
        held = {row[0] for row in rows}
        return [i for i in ids if i not in held]

    def release(self, key: str) -> bool:
        """Let a held sequence go on (its failed head stays on the failed list, no longer
        its head); whether it was held."""
        state = self._locked(key)
        if state is None or not state[1]:
            return False
        self._next(key)
        return True

    def held_sequences(self, limit: int) -> list[HeldSequence]:
        rows, _ = self._execute(HELD_SEQUENCES, [limit], True)
        return [HeldSequence(key, head, int(n)) for key, head, n in rows]

