"""How a claim on PostgreSQL wakes the quiet workers (database_wait), so that a job
claimed while they ask nothing, by a worker that then dies, is still swept in time.

A quiet worker holds the advisory lock QUIET_LOCK, shared, on its listening
connection. A claim that takes a job tries it, exclusive, for an instant
(`MUST_WAKE`, once per statement and only once it updates a row): not taken, a worker
is quiet, and the claim notifies the `laterite` channel. No wake-up is lost: such a
claim holds CLAIM_LOCK, shared, until its commit, and a worker that took QUIET_LOCK
is quiet only once it could take CLAIM_LOCK, exclusive, for an instant (no claim
that looked before is still uncommitted) and its look then found no job claimed.
This is the push's protocol (sql_postgres_push) with locks of its own: a claim in
flight must not keep an idle worker from waiting, only a quiet one from going quiet.
A claim that takes nothing takes no lock, and none notifies while no worker is quiet.
"""

from __future__ import annotations

from .sql import CHANNEL, CLAIM_LOCK, QUIET_LOCK

__all__ = ["LOOK", "MUST_WAKE", "WAKES_QUIET"]

# Whether a claim must notify. A CASE, so that the locks are tried in this order, and
# the instant lock let go only if taken.
MUST_WAKE = (
    f"CASE WHEN NOT pg_try_advisory_xact_lock_shared({CLAIM_LOCK}) THEN true "
    f"WHEN pg_try_advisory_lock({QUIET_LOCK}) THEN NOT pg_advisory_unlock({QUIET_LOCK}) "
    f"ELSE true END"
)
# Appended to the `claimed_by` a claim writes: '' always, having notified if it must. An
# uncorrelated subquery, so PostgreSQL runs it once, as the first row is updated.
WAKES_QUIET = (
    f"(SELECT CASE WHEN {MUST_WAKE} THEN left(pg_notify('{CHANNEL}', '')::text, 0) "
    f"ELSE '' END)"
)
# A worker's look, on its listening connection, before it may go quiet: NULL when it
# could not take QUIET_LOCK (a claim tries it at this instant), false when it took it
# but a claim that may not have notified is uncommitted, true when it took it and no
# such claim is in flight.
LOOK = (
    f"SELECT CASE WHEN pg_try_advisory_lock_shared({QUIET_LOCK}) THEN "
    f"CASE WHEN pg_try_advisory_lock({CLAIM_LOCK}) THEN pg_advisory_unlock({CLAIM_LOCK}) "
    f"ELSE false END END"
)
