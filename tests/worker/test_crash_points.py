"""A crash at every step: each multi-step operation killed (SIGKILL) at each of its crash
points (laterite_django/core/crash_points.py), then a fresh worker: nothing lost, nothing run
twice.

Each case runs the operation in a real subprocess started with LATERITE_CRASH_AT=<point>
(a `queue_work`, a `queue_retry`/`queue_forget`/`queue_cancel` command, or a script for
a push in a transaction), asserts it died by SIGKILL at that point (exit -9 and the
point's line on its stderr: the point is reached), waits for the dead worker's claims
to expire (LATERITE_QUEUE_RETRY_AFTER=1), repeats what an operator would repeat (the
retry, forget or cancel whose command died), runs a fresh `queue_work
--stop-when-empty`, and checks the journal (the `Record` rows the test jobs write):

- every job ran, or is on the failed list once with its reason, and nothing is left in
  the store;
- none ran twice unless the crash came while it ran: between the end of its run and
  the commit of its settle (the points marked "in flight" below), where it may run
  once more, never more;
- a cancelled job never runs; a batch's callback fires once; a chain's next link runs
  once; a schedule's tick is pushed once.

The points, where they sit, and what is asserted there (DB: the database store, on
SQLite and PostgreSQL; R: the Redis store; "in flight": the job may run twice):

push (a push inside transaction.atomic() on Redis goes through the database outbox):
  push.outbox_written         R   outbox rows written, before the caller's commit: the
                                  caller's row and the job both gone, the job never runs
  push.outbox.after_commit    R   committed, not moved to Redis: the sweep moves it, it
                                  runs once
  push.outbox.after_redis_push R  pushed to Redis, the rows' deletion not committed: moved
                                  again, stored once (its mark), runs once
claim:
  claim.after                 DB R  claimed, not started: runs once after the sweep
heartbeat:
  heartbeat.after_beat        DB R  killed while running (in flight): the job ends once,
                                    or is on the failed list with its reason
delete (a success settled):
  delete.before               DB R  ran, not deleted (in flight): runs at most twice
  delete.after                DB R  deleted: ran once, never again
release (a retry):
  release.before              DB R  attempt 1 failed, not released (in flight): attempt 2
                                    runs and succeeds once
  release.after               DB R  released: attempt 2 runs and succeeds once
fail (to the failed list):
  fail.before                 DB R  failed, not stored (in flight): one failed row
  fail.before_commit          DB    inside fail()'s transaction: rolled back, one row
  fail.after_mark             R     marked failing, no row: the sweep gives it back, one row
  fail.after_failed_row       R     row written, job still held: the sweep removes it, one
                                    row, ran once
  fail.after                  DB R  stored: one row, ran once
the failed list (queue_retry, queue_forget, repeated after the crash):
  failed.retry.after_push     DB R  the new job pushed, the rows not deleted: retried
                                    again, the job runs once more in all (twice: its
                                    first run and its retry), one failed row at the end
  failed.after_removals       R     (retry and forget) the failed jobs' Redis removals
                                    done, rows not handled: as above; forgotten: never runs
cancel (queue_cancel of a waiting job, repeated after the crash):
  cancel.before_commit        DB    rolled back: the repeat cancels it
  cancel.after_hold           R     held under the cancel's claim, no row: the sweep
                                    finishes the cancel
  cancel.after_rows           R     row written, job held: the sweep deletes it
                                    (all: never runs, one failed row saying cancelled)
batch (two jobs and a `then` callback):
  batch.count.before_commit   DB (SQLite)  the deletion and count rolled back (in flight)
  batch.count.after_decrement DB (PostgreSQL)  counted to 0 in the claim's commit, the
                                  callback not pushed: the sweep pushes it
  batch.callbacks.after_push  DB (PostgreSQL)  finish_settled rolled back: pushed again
  batch.count.after_finish    R   the ends listed, not counted: the sweep counts them
  batch.count.after_count     R   counted, still listed: counted again, moves nothing
  push.outbox.after_commit,
  push.outbox.after_redis_push R  the callback in the outbox (as for a push)
                                  (all: each job ran, at most twice in flight, the
                                  callback fired once)
chain (two links):
  chain.next.after_push       DB  the next link pushed in the deletion's transaction,
                                  rolled back: the first link runs again (in flight),
                                  the second once
schedule (every second):
  schedule.fire.after_push    DB  the tick's job pushed in the fire's transaction, rolled
                                  back: no tick is pushed twice
sweep (of a job whose worker died at claim.after):
  sweep.after_orphans         DB  batches finished, claims not requeued yet
  sweep.after_requeue         DB R  claims requeued, nothing after
  sweep.after_marked          R   claims that died while failing finished
                                  (all: the job runs once)

Redis's FINISH, FIRE, CLAIM and PUSH scripts are one write each, as are the database
store's one-statement push, claim, heartbeat and release: no point sits inside them.

A normal run tests each operation at its first point listed for the store (POINTS
below), marked slow, so CI runs them in the SQLite leg and in the slow PostgreSQL leg;
every point: `LATERITE_TEST_CRASH_POINTS=all pytest tests/worker/test_crash_points.py`
(or LATERITE_TEST_FULL=1).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from laterite_django.core import crash_points
from laterite_django.models import FailedJob, OutboxJob
from laterite_django.workflows import batch, chain
from tests.conftest import FULL, ROOT, STORES
from tests.testapp import jobs
from tests.testapp.models import Record

pytestmark = pytest.mark.django_db(transaction=True)

RETRY_AFTER = 1.0
ENV = {"LATERITE_TEST_RETRY_AFTER": str(RETRY_AFTER), "LATERITE_TEST_LOG_LEVEL": "ERROR"}
ALL = FULL or os.environ.get("LATERITE_TEST_CRASH_POINTS") == "all"
VENDOR = os.environ.get("LATERITE_TEST_DB", "sqlite")

# The points of each operation per store ("database" on SQLite, on PostgreSQL; "redis"),
# the first of each the one a normal run tests.
_DB = {"sqlite": "database", "postgres": "database"}
POINTS: dict[str, dict[str, list[str]]] = {
    "push": {"redis": ["push.outbox.after_redis_push", "push.outbox_written",
                       "push.outbox.after_commit"]},
    "claim": {"database": ["claim.after"], "redis": ["claim.after"]},
    "heartbeat": {"database": ["heartbeat.after_beat"], "redis": ["heartbeat.after_beat"]},
    "delete": {"database": ["delete.after", "delete.before"],
               "redis": ["delete.after", "delete.before"]},
    "release": {"database": ["release.before", "release.after"],
                "redis": ["release.before", "release.after"]},
    "fail": {"database": ["fail.before_commit", "fail.before", "fail.after"],
             "redis": ["fail.after_failed_row", "fail.after_mark", "fail.before",
                       "fail.after"]},
    "retry": {"database": ["failed.retry.after_push"],
              "redis": ["failed.retry.after_push", "failed.after_removals"]},
    "forget": {"redis": ["failed.after_removals"]},
    "cancel": {"database": ["cancel.before_commit"],
               "redis": ["cancel.after_hold", "cancel.after_rows"]},
    "batch": {"sqlite": ["batch.count.before_commit"],
              "postgres": ["batch.count.after_decrement", "batch.callbacks.after_push"],
              "redis": ["batch.count.after_finish", "batch.count.after_count",
                        "push.outbox.after_commit", "push.outbox.after_redis_push"]},
    "chain": {"database": ["chain.next.after_push"]},
    "schedule": {"database": ["schedule.fire.after_push"]},
    "step": {"database": ["step.after_save"], "redis": ["step.after_save"]},
    "iterate": {"database": ["iterate.after_save"], "redis": ["iterate.after_save"]},
    "sweep": {"database": ["sweep.after_requeue", "sweep.after_orphans"],
              "redis": ["sweep.after_requeue", "sweep.after_marked"]},
}
# Points where the job's run has ended but its settle is not committed: it may run again.
IN_FLIGHT = {"heartbeat.after_beat", "delete.before", "release.before", "fail.before",
             "fail.before_commit", "fail.after_mark", "batch.count.before_commit",
             "chain.next.after_push"}


def points_of(operation: str, store: str) -> list[str]:
    """The points of `operation` on `store` under the database the suite runs on."""
    table = POINTS[operation]
    found = table.get(store, []) if store == "redis" else table.get(
        VENDOR, table.get("database", []))
    return found if ALL else found[:1]


def cases(operation: str) -> list:
    return [pytest.param(store, point, id=f"{store}-{point}")
            for store in STORES for point in points_of(operation, store)]


def crash_cases(operation: str) -> Callable[[Callable], Callable]:
    """Parametrize a test over (store, point), each store's points for `operation`;
    slow (real worker processes, waits for claims to expire)."""
    parametrize = pytest.mark.parametrize(("store_kind", "point"), cases(operation),
                                          indirect=["store_kind"])
    return lambda test: pytest.mark.slow(parametrize(test))


# -- the journal and the store -------------------------------------------------------


def runs(kind: str, value: str | None = None) -> list[tuple[str, int]]:
    """(value, attempt) of each run recorded under `kind` (and `value`), in order."""
    rows = Record.objects.filter(kind=kind).order_by("id")
    if value is not None:
        rows = rows.filter(value=value)
    return list(rows.values_list("value", "attempt"))


def left(store) -> int:
    """Jobs still in the store, on any queue: waiting, delayed or claimed."""
    return sum(c.total for c in store.counts().values())


def failed(name: str) -> list[str]:
    """The errors of the failed list's rows of job `name`."""
    return list(FailedJob.objects.filter(name=name).values_list("error", flat=True))


def assert_settled(store) -> None:
    assert left(store) == 0, store.counts()
    assert not OutboxJob.objects.exists(), "a job left in the outbox"


def runs_allowed(point: str) -> int:
    """How many runs a job killed at `point` may have: twice only in flight."""
    return 2 if point in IN_FLIGHT else 1


# -- the subprocesses -----------------------------------------------------------------


def killed(done: subprocess.CompletedProcess, point: str) -> None:
    """Assert the process died by SIGKILL at `point` (so the point is reached)."""
    assert done.returncode == -9, (
        f"not killed at {point} (exit {done.returncode}):\n{done.stderr[-3000:]}")
    assert f"laterite crash point: {point} " in done.stderr, done.stderr[-3000:]


def crash_worker(workers, point: str, *args: str, nth: int = 1) -> None:
    """Run a one-process `queue_work --stop-when-empty` that dies at `point`."""
    at = point if nth == 1 else f"{point}:{nth}"
    done = workers.run("--processes", "1", "--stop-when-empty", *args,
                       env={**ENV, crash_points.ENV: at})
    killed(done, point)


def crash_command(workers, point: str, *args: str) -> None:
    """Run `manage.py ARGS` that dies at `point`."""
    killed(workers.command(*args, env={**ENV, crash_points.ENV: point}), point)


def recover(workers, *args: str) -> subprocess.CompletedProcess:
    """Once the dead process's claims expired, a fresh worker runs what is left."""
    time.sleep(RETRY_AFTER + 0.5)
    done = workers.run("--processes", "1", "--stop-when-empty", "--wait-delayed", "2", *args,
                       env=ENV, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def drain(workers) -> None:
    done = workers.run("--processes", "1", "--stop-when-empty", env=ENV)
    assert done.returncode == 0, done.stderr[-3000:]


# -- the registry ------------------------------------------------------------------------


def test_every_crash_point_in_the_code_is_registered_and_tested():
    package = Path(crash_points.__file__).parent.parent  # the package, core/ included
    called = set()
    for path in package.rglob("*.py"):
        if path.name != "crash_points.py":
            called |= set(re.findall(r'crash_point\("([^"]+)"\)', path.read_text()))
    assert called == set(crash_points.POINTS), (
        f"called, not in POINTS: {sorted(called - set(crash_points.POINTS))}; "
        f"in POINTS, never called: {sorted(set(crash_points.POINTS) - called)}")
    tested = {p for table in POINTS.values() for points in table.values() for p in points}
    assert tested == set(crash_points.POINTS), (
        f"no test crashes at: {sorted(set(crash_points.POINTS) - tested)}")


def test_a_point_kills_its_process_at_the_nth_time_only():
    code = ("from laterite_django.core.crash_points import crash_point\n"
            "crash_point('x.y'); crash_point('x.z'); print('once', flush=True)\n"
            "crash_point('x.y'); print('twice', flush=True)\n")
    env = {**os.environ, crash_points.ENV: "x.y:2", "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == -9 and done.stdout == "once\n", done
    assert "laterite crash point: x.y " in done.stderr


# -- one test per operation ---------------------------------------------------------------

PUSH_SCRIPT = """
import django
django.setup()
from django.db import transaction
from tests.testapp import jobs
from tests.testapp.models import Record
with transaction.atomic():
    Record.objects.create(kind="caller", value="p")
    jobs.record.push("p")
"""


@crash_cases("push")
def test_push_in_a_transaction(store, workers, point):
    done = subprocess.run([sys.executable, "-c", PUSH_SCRIPT], cwd=ROOT,
                          env=workers.env(**ENV, **{crash_points.ENV: point}),
                          capture_output=True, text=True, timeout=60)
    killed(done, point)
    recover(workers)
    committed = Record.objects.filter(kind="caller").exists()
    # The job runs once if the caller's transaction committed, else never.
    assert runs("record") == ([("p", 1)] if committed else [])
    assert committed == (point != "push.outbox_written")
    assert_settled(store)


@crash_cases("claim")
def test_claim(store, workers, point):
    jobs.record.push("c")
    crash_worker(workers, point)
    assert runs("record") == []
    recover(workers)
    assert [value for value, _ in runs("record")] == ["c"]
    assert not FailedJob.objects.exists()
    assert_settled(store)


@crash_cases("heartbeat")
def test_heartbeat(store, workers, point):
    jobs.sleeper.push(1.5, "h")  # beats every RETRY_AFTER / 3 while it sleeps
    crash_worker(workers, point)
    assert runs("sleeper-end") == []
    recover(workers)
    starts, ends = runs("sleeper-start"), runs("sleeper-end")
    assert 1 <= len(starts) <= 2 and len(ends) <= 1
    # Run again to its end, or (its one try charged to the killed run) failed, saying why.
    errors = failed("tests.sleeper")
    assert (len(ends), len(errors)) in {(1, 0), (0, 1)}, (starts, ends, errors)
    assert all(errors)
    assert_settled(store)


@crash_cases("delete")
def test_delete_of_a_success(store, workers, point):
    jobs.record.push("d")
    crash_worker(workers, point)
    assert len(runs("record")) == 1
    recover(workers)
    assert 1 <= len(runs("record")) <= runs_allowed(point)
    assert not FailedJob.objects.exists()
    assert_settled(store)


@crash_cases("release")
def test_release_for_a_retry(store, workers, point):
    jobs.flaky.push("r", 2)  # fails its first attempt, succeeds at its second
    crash_worker(workers, point)
    assert runs("flaky-attempt") == [("r", 1)]
    recover(workers)
    attempts = [attempt for _, attempt in runs("flaky-attempt")]
    assert attempts == sorted(set(attempts)) and attempts[0] == 1, attempts
    assert len(runs("flaky-ok")) == 1
    assert not FailedJob.objects.exists()
    assert_settled(store)


@crash_cases("fail")
def test_fail_to_the_failed_list(store, workers, point):
    jobs.fail_now.push("f")  # Fail: straight to the failed list
    crash_worker(workers, point)
    recover(workers)
    assert 1 <= len(runs("fail-now")) <= runs_allowed(point)
    errors = failed("tests.fail_now")
    assert len(errors) == 1 and "no such thing: f" in errors[0], errors
    assert_settled(store)


@crash_cases("retry")
def test_retry_from_the_failed_list(store, workers, point):
    jobs.fail_now.push("x")
    drain(workers)
    (failed_id,) = FailedJob.objects.values_list("id", flat=True)
    crash_command(workers, point, "queue_retry", str(failed_id))
    # The operator sees the command die and retries again whatever is still failed.
    again = workers.command("queue_retry", "--all", env=ENV)
    assert again.returncode == 0, again.stderr
    recover(workers)
    # Its first run and one run of its retry; then it failed again, once.
    assert len(runs("fail-now")) == 2, runs("fail-now")
    assert len(failed("tests.fail_now")) == 1
    assert_settled(store)


@crash_cases("forget")
def test_forget_from_the_failed_list(store, workers, point):
    jobs.fail_now.push("y")
    drain(workers)
    crash_command(workers, point, "queue_forget", "--all", "--no-input")
    again = workers.command("queue_forget", "--all", "--no-input", env=ENV)
    assert again.returncode == 0, again.stderr
    recover(workers)
    assert len(runs("fail-now")) == 1
    assert not FailedJob.objects.exists()
    assert_settled(store)


@crash_cases("cancel")
def test_cancel_of_a_waiting_job(store, workers, point):
    job_id = jobs.record.push("k").id
    crash_command(workers, point, "queue_cancel", str(job_id))
    again = workers.command("queue_cancel", str(job_id), env=ENV)
    assert again.returncode == 0, again.stderr
    recover(workers)
    assert runs("record") == [], "a cancelled job ran"
    errors = failed("tests.record")
    assert len(errors) == 1 and "cancel" in errors[0].lower(), errors
    assert_settled(store)


@crash_cases("batch")
def test_batch_count_and_callbacks(store, workers, point):
    batch([jobs.record.call("b0"), jobs.record.call("b1")],
          then=jobs.callback.call("then")).push()
    crash_worker(workers, point, "--batch", "1")
    recover(workers)
    for value in ("b0", "b1"):
        assert 1 <= len(runs("record", value)) <= runs_allowed(point), runs("record")
    fired = runs("callback")
    assert len(fired) == 1 and fired[0][0].startswith("then#"), fired
    assert not FailedJob.objects.exists()
    assert_settled(store)


@crash_cases("chain")
def test_chain_next_link(store, workers, point):
    chain(jobs.record.call("c0"), jobs.record.call("c1")).push()
    crash_worker(workers, point)
    recover(workers)
    assert 1 <= len(runs("record", "c0")) <= runs_allowed(point)
    assert len(runs("record", "c1")) == 1, runs("record")
    assert not FailedJob.objects.exists()
    assert_settled(store)


@crash_cases("schedule")
def test_schedule_fire(store, workers, point):
    schedules = {"LATERITE_TEST_SCHEDULES":
                 '{"tick": {"job": "tests.scheduled", "every": 1}}'}
    done = workers.run("--processes", "1",
                       env={**ENV, **schedules, crash_points.ENV: point})
    killed(done, point)
    done = workers.run("--processes", "1", "--max-seconds", "3", env={**ENV, **schedules},
                       timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    recover(workers)  # what is left of the ticks pushed
    ticks = [value for value, _ in runs("scheduled")]
    assert ticks and len(ticks) == len(set(ticks)), f"a tick ran twice: {ticks}"


@crash_cases("sweep")
def test_sweep(store, workers, point):
    jobs.record.push("s")
    crash_worker(workers, "claim.after")  # its claim is for the sweep to return
    time.sleep(RETRY_AFTER + 0.5)
    crash_worker(workers, point)
    recover(workers)
    assert [value for value, _ in runs("record")] == ["s"]
    assert not FailedJob.objects.exists()
    assert_settled(store)


@crash_cases("step")
def test_step_saved_then_killed(store, workers, point):
    """Killed between a step's end and the job's next line: the step's side effect
    happened once, and the rerun received the saved result."""
    jobs.charge.push("o1")
    crash_worker(workers, point)
    assert runs("charged") == [("o1", 1)] and runs("receipt") == []
    recover(workers)
    assert runs("charged") == [("o1", 1)]
    assert runs("receipt") == [("ch_o1_1", 2)]
    assert_settled(store)


@crash_cases("iterate")
def test_iterate_cursor_saved_then_killed(store, workers, point):
    """Killed just after a chunk's cursor was saved (the 3rd): the rerun starts after
    that chunk, so no number is done twice and none is missed."""
    jobs.walk.push(50, 10)
    crash_worker(workers, point, nth=3)
    assert len(runs("walk")) == 30
    recover(workers)
    values = sorted(int(v) for v, _ in runs("walk"))
    assert values == list(range(50))
    assert {a for _, a in runs("walk")} == {1, 2}
    assert_settled(store)
