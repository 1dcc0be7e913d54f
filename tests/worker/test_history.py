"""Job history (LATERITE_QUEUE_HISTORY) on every store, written by real workers: one
JobRecord per finished job (succeeded, failed for good, cancelled) with its fields;
none while history is off or for a queue that keeps none."""

from __future__ import annotations

import json
import socket
import time
from datetime import timedelta

import pytest
from django.test import override_settings
from django.utils import timezone

from laterite_django.models import JobRecord
from laterite_django.stores import get_store
from tests.testapp import jobs

HISTORY = {"keep": "7d"}


def drain(workers, history: object = HISTORY) -> None:
    result = workers.run("--stop-when-empty", timeout=60,
                         env={"LATERITE_TEST_HISTORY": json.dumps(history)})
    assert result.returncode == 0, result.stderr


def records() -> dict[int, JobRecord]:
    return {r.job_id: r for r in JobRecord.objects.all()}


def test_finished_jobs_leave_one_record_each(store, workers):
    before = timezone.now()
    ok = jobs.add.push(2, 3).id
    named = jobs.record.push(value="x").id
    broken = jobs.always_broken.push("b").id
    cancelled = jobs.noop.push(7).id
    with override_settings(LATERITE_QUEUE_HISTORY=HISTORY):
        assert get_store().cancel([cancelled]) == {cancelled: "cancelled"}
    drain(workers)
    found = records()
    assert set(found) == {ok, named, broken, cancelled}
    assert JobRecord.objects.count() == 4  # one each

    done = found[ok]
    assert (done.name, done.queue, done.status) == ("tests.add", "default", "succeeded")
    assert (done.args, done.kwargs, done.encrypted) == ([2, 3], {}, None)
    assert done.attempts == 1 and done.error == ""
    assert done.worker.startswith(f"{socket.gethostname()}:")
    assert done.pushed_at is not None and done.started_at is not None
    assert before - timedelta(seconds=5) <= done.pushed_at <= done.started_at
    assert done.started_at <= done.finished_at <= timezone.now() + timedelta(seconds=5)
    assert found[named].kwargs == {"value": "x"}

    failed = found[broken]
    assert (failed.status, failed.attempts) == ("failed", 2)
    assert "broken b" in failed.error and failed.started_at is not None

    gone = found[cancelled]
    assert (gone.status, gone.attempts, gone.args) == ("cancelled", 0, [7])
    assert gone.error.startswith("Cancelled") and gone.started_at is None


def test_nothing_is_recorded_while_history_is_off(store, workers):
    jobs.add.push(1, 1)
    jobs.always_broken.push("off")
    cancelled = jobs.noop.push(1).id
    get_store().cancel([cancelled])
    drain(workers, history=None)
    assert JobRecord.objects.count() == 0


def test_only_the_queues_that_keep_history_record(store, workers):
    kept = jobs.mail.push("m").id
    jobs.add.push(1, 2)  # queue "default": not named, so not kept
    drain(workers, history={"queues": {"mail": "1d"}})
    assert list(records()) == [kept]


def test_encrypted_arguments_stay_ciphertext_in_the_history(store):
    from django.db import connection

    from laterite_django.testing import run_jobs
    from tests.testapp.encrypted_jobs import broken, every

    email, token = "erin.private@example.com", "tok-hist-77aa"
    with override_settings(LATERITE_QUEUE_HISTORY=HISTORY):
        every.push(1, email, token=token)
        broken.push(email, {"token": token})
        run_jobs()
    assert {r.name: r.status for r in JobRecord.objects.all()} == {
        "tests.enc.every": "succeeded", "tests.enc.broken": "failed"}
    with connection.cursor() as cursor:
        cursor.execute("SELECT * FROM laterite_job_record")
        stored = repr(cursor.fetchall())
    assert email not in stored and token not in stored
    assert "[encrypted]" in stored and all(r.encrypted for r in JobRecord.objects.all())


def test_every_settle_path_records(store):
    """Chains and batches (their settles push the next link, count the batch), a limited
    queue's claim, each settle writing the records of the jobs it deletes."""
    from laterite_django import batch, chain
    from laterite_django.testing import run_jobs

    with override_settings(LATERITE_QUEUE_HISTORY=HISTORY,
                           LATERITE_QUEUE_LIMITS={"mail": {"concurrency": 2}}):
        chain(jobs.record.call("a"), jobs.record.call("b")).push()
        batch([jobs.record.call("c"), jobs.record.call("d")],
              then=jobs.record.call("e")).push()
        jobs.mail.push("limited")
        for _ in range(5):
            run_jobs()
    kept = sorted((r.kwargs or {}).get("value") or r.args[0] for r in JobRecord.objects.all())
    assert kept == ["a", "b", "c", "d", "e", "limited"]
    assert {r.status for r in JobRecord.objects.all()} == {"succeeded"}


def test_a_sequence_s_settles_record(store_kind, transactional_db, tmp_path, monkeypatch):
    import pytest

    from laterite_django.testing import run_jobs

    if store_kind != "database":
        pytest.skip("sequences are kept by the database stores")
    monkeypatch.setenv("LATERITE_TEST_SEQ_LOG", str(tmp_path / "seq"))
    with override_settings(LATERITE_QUEUE_HISTORY=HISTORY):
        first = jobs.seq_go_on.push("k", 1, fail=True).id
        second = jobs.seq_go_on.push("k", 2).id
        for _ in range(4):
            run_jobs("low")
    found = records()
    assert (found[first].status, found[second].status) == ("failed", "succeeded")


def test_the_redis_list_is_moved_once_whoever_moves_it(store_kind, transactional_db):
    import pytest

    if store_kind != "redis":
        pytest.skip("the Redis store's list of records")
    store = get_store()
    key = f"{store.prefix}:history"
    entry = json.dumps(["41", "tests.add", "default", '{"args":[1,2],"kwargs":{}}', "1",
                        "1765000000000000", "host:1", "1765000001.5", "1765000002.0"])
    other = entry.replace('"41"', '"42"')
    store.client.rpush(key, entry, entry, other)  # a record listed twice (a retried move)
    with override_settings(LATERITE_QUEUE_HISTORY=HISTORY):
        assert store.move_history() == 2
        assert store.client.llen(key) == 0
        store.client.rpush(key, entry)  # moved again: a worker died before taking it off
        assert store.move_history() == 0
    assert store.client.llen(key) == 0
    done = records()
    assert set(done) == {41, 42}
    assert done[41].ran == pytest.approx(0.5) and done[41].worker == "host:1"
    assert done[41].args == [1, 2] and done[41].status == "succeeded"


def test_a_settle_with_nothing_to_claim_records_once(store):
    """A worker whose queues are all paused settles its finished jobs without a claim."""
    from laterite_django.testing import run_jobs

    with override_settings(LATERITE_QUEUE_HISTORY=HISTORY):
        jobs.add.push(1, 2)
        claims = store.claim(["default"], "host:9", 1)
        assert len(claims) == 1, claims
        now = time.time()
        claims[0].started, claims[0].ended = now - 1.0, now
        assert store.settle_and_claim(claims, [], "host:9", 1) == []
        run_jobs()
    assert JobRecord.objects.count() == 1
    assert JobRecord.objects.get().ran == pytest.approx(1.0)


def test_a_job_settled_by_another_than_its_worker_s_hand_is_recorded(store):
    """No start or end known (the supervisor settling a dead child's job, a job of a
    cancelled batch deleted unrun): recorded, ended at the settle."""
    with override_settings(LATERITE_QUEUE_HISTORY=HISTORY):
        jobs.add.push(3, 4)
        claims = store.claim(["default"], "host:9", 1)
        assert store.delete(claims) == 1
        store.flush()
    record = JobRecord.objects.get()
    assert record.started_at is None and record.ran is None
    assert abs((timezone.now() - record.finished_at).total_seconds()) < 60


def test_a_record_never_fails_its_job_s_settle(store):
    """An argument holding a NUL character is valid JSON that PostgreSQL's jsonb refuses:
    the job settles, its record kept without its arguments."""
    from laterite_django.models import FailedJob
    from laterite_django.testing import run_jobs

    with override_settings(LATERITE_QUEUE_HISTORY=HISTORY):
        ok = jobs.add.push(a="nul\x00", b="here").id
        broken = jobs.always_broken.push("nul\x00too").id
        run_jobs()
        run_jobs()
    found = records()
    assert (found[ok].status, found[broken].status) == ("succeeded", "failed")
    # Kept where the database can (SQLite's JSON is text), else left out.
    assert found[ok].kwargs in (None, {"a": "nul\x00", "b": "here"})
    assert found[broken].args in (None, ["nul\x00too"])
    assert found[ok].worker and found[broken].worker
    assert FailedJob.objects.get().job_id == broken


def test_a_record_the_table_refuses_never_stops_the_moves(store_kind, transactional_db):
    if store_kind != "redis":
        pytest.skip("the Redis store's list of records")
    store = get_store()
    key = f"{store.prefix}:history"

    def entry(job_id: int, worker: str = "host:1") -> str:
        return json.dumps([str(job_id), "tests.add", "default", '{"args":[],"kwargs":{}}',
                           "1", str(int(time.time() * 1e6)), worker, "", ""])

    # A NUL in a text column: PostgreSQL refuses the row (SQLite keeps it).
    store.client.rpush(key, entry(51), entry(52, "host\x00:2"), entry(53))
    with override_settings(LATERITE_QUEUE_HISTORY=HISTORY):
        store.move_history()
    assert store.client.llen(key) == 0
    assert {51, 53} <= set(records())


def test_a_job_settled_by_the_supervisor_keeps_its_start(store, workers):
    """With --processes, a job whose worker process the supervisor killed past its
    timeout is failed by the supervisor: its record has the start its worker stamped
    (sent with the start report, worker/reports.py), not none."""
    before = timezone.now()
    stuck = jobs.stuck_in_c.push(120).id  # timeout=0.5, tries=2: killed twice
    result = workers.run("--processes", "2", "--stop-when-empty", timeout=60,
                         env={"LATERITE_TEST_HISTORY": json.dumps(HISTORY)})
    assert result.returncode == 0, result.stderr
    found = records()[stuck]
    assert (found.status, found.attempts) == ("failed", 2)
    assert "was killed" in found.error
    assert found.started_at is not None
    assert before - timedelta(seconds=5) <= found.started_at <= found.finished_at
    assert found.finished_at - found.started_at < timedelta(seconds=60)  # not slept out
