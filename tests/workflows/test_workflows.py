"""Chains and batches on every store, run by the worker's rules (testing.run_jobs)."""

from __future__ import annotations

import threading

import pytest
from django.db import OperationalError, connection
from django.utils import timezone

from laterite_django import batch, cancel_batch, chain
from laterite_django.exceptions import InvalidPayload
from laterite_django.models import Batch, BatchEnd, FailedJob
from laterite_django.stores import get_store
from laterite_django.stores.database.workflows import finish_settled
from laterite_django.testing import run_jobs
from tests.conftest import job_hashes
from tests.testapp.jobs import grow, mail, record, step
from tests.testapp.models import Record

pytestmark = pytest.mark.django_db(transaction=True)


def steps() -> list[str]:
    return list(Record.objects.filter(kind="step").order_by("id").values_list("value", flat=True))


def records(value: str) -> int:
    return Record.objects.filter(kind="record", value=value).count()


def test_a_chain_runs_its_links_in_order(store):
    pushed = chain(step.call("a"), step.call("b"), step.call("c")).push()
    assert pushed.status == "queued"
    assert store.counts()["default"].waiting == 1  # only the first link waits
    run_jobs()
    assert steps() == ["a", "b", "c"]
    assert "default" not in store.counts()


def test_a_failed_link_keeps_the_rest_and_its_retry_resumes_the_chain(store):
    Record.objects.create(kind="gate", value="b")
    chain(step.call("a"), step.call("b"), step.call("c")).push()
    run_jobs()
    assert steps() == ["a"]
    row = FailedJob.objects.get()
    assert row.name == "tests.step" and '"chain":' in row.payload
    Record.objects.filter(kind="gate").delete()
    store.retry([row.pk])
    run_jobs()
    assert steps() == ["a", "b", "c"]


def test_a_batch_pushes_then_and_finally_once_when_all_succeeded(store):
    b = batch([step.call(f"s{i}") for i in range(5)], then=record.call("then"),
              catch=record.call("catch"), finally_=record.call("finally"), name="five").push()
    assert b.pk and b.total == 5 and b.pending == 5
    run_jobs()
    b.refresh_from_db()
    assert sorted(steps()) == [f"s{i}" for i in range(5)]
    assert (b.pending, b.failed, b.succeeded, b.state) == (0, 0, 5, "finished")
    assert (records("then"), records("catch"), records("finally")) == (1, 0, 1)
    assert set(Record.objects.filter(kind="step-batch").values_list("value", flat=True)) == {
        f"s{i}@{b.pk}" for i in range(5)}
    assert not BatchEnd.objects.exists()


def test_a_failure_pushes_catch_once_and_never_then(store):
    Record.objects.create(kind="gate", value="s1")
    Record.objects.create(kind="gate", value="s3")
    b = batch([step.call(f"s{i}") for i in range(5)], then=record.call("then"),
              catch=record.call("catch"), finally_=record.call("finally")).push()
    run_jobs()
    b.refresh_from_db()
    assert (b.pending, b.failed, b.state) == (0, 2, "failed")
    assert (records("then"), records("catch"), records("finally")) == (0, 1, 1)
    # A failed job retried afterwards runs, but the finished batch counts nothing again.
    Record.objects.filter(kind="gate").delete()
    store.retry(list(FailedJob.objects.values_list("pk", flat=True)))
    run_jobs()
    b.refresh_from_db()
    assert (b.pending, b.failed) == (0, 2)
    assert (records("then"), records("catch"), records("finally")) == (0, 1, 1)


def test_allow_failures_still_pushes_then(store):
    Record.objects.create(kind="gate", value="s0")
    b = batch([step.call(f"s{i}") for i in range(3)], then=record.call("then"),
              catch=record.call("catch"), finally_=record.call("finally"),
              allow_failures=True).push()
    run_jobs()
    b.refresh_from_db()
    assert (b.pending, b.failed) == (0, 1)
    assert (records("then"), records("catch"), records("finally")) == (1, 0, 1)


def test_a_job_adding_to_its_batch_makes_the_callbacks_wait(store):
    b = batch([grow.call("g", 3), step.call("x")], then=record.call("then")).push()
    run_jobs()
    b.refresh_from_db()
    assert sorted(steps()) == ["g", "g-0", "g-1", "g-2", "x"]
    assert (b.total, b.pending) == (5, 0)
    assert records("then") == 1
    then_id = Record.objects.get(kind="record", value="then").pk
    assert all(r.pk < then_id for r in Record.objects.filter(kind="step"))


def test_an_empty_batch_pushes_its_callbacks_at_once(store):
    b = batch([], then=record.call("then"), finally_=record.call("finally")).push()
    assert b.finished_at is not None
    run_jobs()
    assert (records("then"), records("finally")) == (1, 1)


def test_cancelling_a_batch_drops_what_waits_and_pushes_finally(store):
    b = batch([step.call(f"s{i}") for i in range(4)], then=record.call("then"),
              catch=record.call("catch"), finally_=record.call("finally")).push()
    cancel_batch(b.pk)
    run_jobs()
    b.refresh_from_db()
    assert steps() == []
    assert b.state == "cancelled" and b.pending == 0 and b.finished_at is not None
    assert (records("then"), records("catch"), records("finally")) == (0, 0, 1)
    assert not FailedJob.objects.exists()


def test_clearing_a_queue_counts_its_batch_jobs_as_failed(store):
    """A cleared job of a batch never runs: it counts as failed on its batch, as a job
    cancelled through queue_cancel does, so the batch still ends (catch and finally_
    once, then never) instead of waiting for good."""
    b = batch([step.call("kept"), mail.call("cleared-0"), mail.call("cleared-1")],
              then=record.call("then"), catch=record.call("catch"),
              finally_=record.call("finally")).push()
    assert store.clear("mail") == 2
    run_jobs()
    b.refresh_from_db()
    assert steps() == ["kept"]
    assert (b.pending, b.failed, b.state) == (0, 2, "failed")
    assert (records("then"), records("catch"), records("finally")) == (0, 1, 1)
    # A batch cleared whole ends too; with allow_failures, then is pushed.
    other = batch([step.call("a"), step.call("b")], then=record.call("then2"),
                  finally_=record.call("finally2"), allow_failures=True).push()
    assert store.clear() == 2
    run_jobs()
    other.refresh_from_db()
    assert (other.pending, other.failed) == (0, 2)
    assert (records("then2"), records("finally2")) == (1, 1)


def test_clear_leaves_batches_whose_jobs_it_did_not_delete(store):
    b = batch([step.call("a")], then=record.call("then")).push()
    mail.push("plain")
    assert store.clear("mail") == 1
    b.refresh_from_db()
    assert (b.pending, b.failed) == (1, 0)
    run_jobs()
    assert records("then") == 1


def test_cancelling_an_unknown_batch_names_it(store):
    with pytest.raises(ValueError, match="12345"):
        cancel_batch(12345)


def test_a_call_is_checked_where_it_is_written(store):
    with pytest.raises(InvalidPayload, match="positional argument 0"):
        step.call(object())
    with pytest.raises(TypeError):
        step.call("a", "b", "c")
    with pytest.raises(TypeError, match=r"job\.call"):
        chain(step.call("a"), "b")
    with pytest.raises(TypeError, match="then"):
        batch([step.call("a")], then="x")
    assert get_store().counts() == {}


def test_batch_rows_and_jobs_commit_or_roll_back_together(store):
    from django.db import transaction

    with pytest.raises(RuntimeError), transaction.atomic():
        batch([step.call("a")], then=record.call("then")).push()
        raise RuntimeError("rolled back")
    assert not Batch.objects.exists()
    run_jobs()
    assert steps() == []


def test_cancel_removes_the_waiting_and_delayed_jobs_of_the_batch_only(store):
    from datetime import timedelta

    b = batch([step.call(f"s{i}") for i in range(3)], finally_=record.call("finally")).push()
    other = batch([step.call("o")]).push()
    step.push_in(timedelta(hours=1), "plain")
    assert cancel_batch(b.pk) == 3
    assert cancel_batch(b.pk) == 0  # already cancelled
    assert store.counts()["default"].total == 3  # the other batch's job, plain, finally
    run_jobs()
    assert steps() == ["o"] and records("finally") == 1
    other.refresh_from_db()
    assert other.state == "finished"


def _stored_key(store) -> str | None:
    """The concurrency key of the one job waiting, as the store keeps it."""
    if store.__class__.__name__ == "RedisStore":
        (key,) = job_hashes(store.client, store.prefix)
        value = store.client.hget(key, "ck")
        return None if value is None else value.decode()
    from laterite_django.models import Job

    return Job.objects.get().concurrency_key


def test_a_link_keeps_its_concurrency_key_and_loses_its_unique_key(store):
    from laterite_django import job
    from laterite_django.registry import registry

    @job("tests.wf_keyed", concurrency=1, concurrency_key=lambda tenant: f"t:{tenant}",
         unique_key=lambda tenant: f"u:{tenant}")
    def keyed(tenant: int) -> None: ...

    try:
        chain(step.call("a"), keyed.call(7)).push()
        claim = store.claim(["default"], "w")[0]
        assert claim.name == "tests.step"
        assert store.delete([claim]) == 1  # settles the first link, pushes the second
        assert _stored_key(store) == "t:7"
        # Its unique key is not kept: a push of the same key is not its duplicate.
        assert keyed.push(7).status == "queued"
        assert store.counts()["default"].waiting == 2
    finally:
        registry.unregister("tests.wf_keyed")


def test_inline_mode_runs_a_chain_and_a_batch_at_the_push(store, settings):
    settings.LATERITE_QUEUE_MODE = "inline"
    assert chain(step.call("a"), step.call("b")).push().status == "ran"
    b = batch([step.call("c"), step.call("d")], then=record.call("then"),
              finally_=record.call("finally")).push()
    assert steps() == ["a", "b", "c", "d"]
    assert (b.pending, b.finished_at is not None) == (0, True)
    assert (records("then"), records("finally")) == (1, 1)
    Record.objects.create(kind="gate", value="f")
    with pytest.raises(Exception, match="gate f is closed"):
        batch([step.call("e"), step.call("f"), step.call("g")], then=record.call("then"),
              catch=record.call("catch"), finally_=record.call("finally")).push()
    assert (records("then"), records("catch"), records("finally")) == (1, 1, 2)
    assert store.counts() == {} and not Batch.objects.exists()


def test_capture_jobs_records_a_chains_first_link_and_a_batchs_jobs(store):
    from laterite_django.testing import capture_jobs

    with capture_jobs() as pushed:
        chain(step.call("a"), step.call("b")).push()
        b = batch([step.call("c"), step.call("d")], then=record.call("then")).push()
    assert [(p.name, p.args) for p in pushed] == [
        ("tests.step", ("a",)), ("tests.step", ("c",)), ("tests.step", ("d",))]
    assert b.pk is None and store.counts() == {} and not Batch.objects.exists()


def test_apush_pushes_from_async_code(store):
    from asgiref.sync import async_to_sync

    async def push_both():
        await chain(step.call("a"), step.call("b")).apush()
        return await batch([step.call("c")], then=record.call("then")).apush()

    b = async_to_sync(push_both)()
    run_jobs()
    assert sorted(steps()) == ["a", "b", "c"] and records("then") == 1
    b.refresh_from_db()
    assert b.state == "finished"


def test_a_plain_push_of_a_workflow_on_the_event_loop_is_refused(store):
    import asyncio

    from laterite_django import PushFromEventLoop

    async def push():
        chain(step.call("a")).push()

    with pytest.raises(PushFromEventLoop):
        asyncio.run(push())


def test_bad_batch_options_name_the_value(store):
    with pytest.raises(TypeError, match="'yes'"):
        batch([step.call("a")], allow_failures="yes")
    with pytest.raises(ValueError, match="at most 200"):
        batch([step.call("a")], name="x" * 201)
    with pytest.raises(TypeError, match="list of calls"):
        batch(step)
    with pytest.raises(ValueError, match="at least one call"):
        chain()


def test_adding_to_a_finished_batch_or_outside_a_batch_is_an_error(store):
    from laterite_django import JobContext, add_to_batch

    b = batch([step.call("a")]).push()
    run_jobs()
    with pytest.raises(ValueError, match=f"Batch {b.pk} has finished"):
        add_to_batch(b.pk, [step.call("late")])
    cx = JobContext(id=1, name="tests.step", queue="default", attempt=1, pushed_at=b.created_at)
    with pytest.raises(ValueError, match="not part of a batch"):
        cx.add_to_batch([step.call("x")])


def test_cancel_leaves_a_job_whose_arguments_look_like_a_batch_mark(store):
    b = batch([step.call("s0")]).push()
    # Arguments whose JSON holds the mark's text: not jobs of the batch.
    record.push({"batch": [b.pk, 0]})
    record.push(value={"batch": [b.pk, 0]})
    assert cancel_batch(b.pk) == 1
    assert store.counts()["default"].waiting == 2


def test_adding_to_a_cancelled_batch_adds_nothing(store):
    from laterite_django import add_to_batch

    b = batch([step.call("a")]).push()
    cancel_batch(b.pk)
    assert add_to_batch(b.pk, [step.call("late")]) == 0
    b.refresh_from_db()
    assert b.total == 1


def _counted_down_without_callbacks(b: Batch) -> None:
    """Leave batch `b` as a worker killed between its counting commit and the push of the
    callbacks leaves it on PostgreSQL: its jobs gone, `pending` at 0, not finished."""
    Batch.objects.filter(pk=b.pk).update(finished_at=timezone.now())  # the clear counts none
    get_store().clear()
    Batch.objects.filter(pk=b.pk).update(pending=0, finished_at=None)


def test_the_sweep_pushes_the_callbacks_of_a_batch_counted_down_by_a_dead_worker(store):
    b = batch([step.call(f"s{i}") for i in range(3)], then=record.call("then"),
              catch=record.call("catch"), finally_=record.call("finally")).push()
    _counted_down_without_callbacks(b)
    store.requeue_abandoned(60, "lost")
    store.requeue_abandoned(60, "lost")  # a second sweep finds it finished
    run_jobs()
    b.refresh_from_db()
    assert b.state == "finished" and b.finished_at is not None
    assert (records("then"), records("catch"), records("finally")) == (1, 0, 1)


def test_racing_finishers_of_a_batch_push_its_callbacks_once(store):
    b = batch([step.call("s")], then=record.call("then"), finally_=record.call("finally")).push()
    _counted_down_without_callbacks(b)
    push = store.push_on_commit if not store.transactional_push else store.push
    start = threading.Barrier(4)
    finished: list[int] = []

    def finish() -> None:
        start.wait()
        try:
            finished.append(finish_settled("default", [b.pk], push))
        except OperationalError:
            # SQLite: a transaction that read the row before another's write commits
            # cannot write after it ("database is locked"); it pushed nothing.
            assert connection.vendor == "sqlite"
        finally:
            connection.close()

    threads = [threading.Thread(target=finish) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(finished)[-1] == 1 and sum(finished) == 1
    run_jobs()
    assert (records("then"), records("finally")) == (1, 1)


def test_a_failed_job_retried_while_its_batch_runs_is_not_counted_twice(store):
    Record.objects.create(kind="gate", value="s0")
    b = batch([step.call("s0"), step.call("s1"), mail.call("last")],
              then=record.call("then"), allow_failures=True).push()
    run_jobs("default")  # s0 fails for good (counted), s1 succeeds; the mail job waits
    b.refresh_from_db()
    assert (b.pending, b.failed) == (1, 1)
    Record.objects.filter(kind="gate").delete()
    store.retry(list(FailedJob.objects.values_list("pk", flat=True)))
    run_jobs("default")  # s0 runs again and succeeds: its end was counted already
    b.refresh_from_db()
    assert steps() == ["s1", "s0"]
    assert (b.pending, b.failed, b.finished_at) == (1, 1, None)
    run_jobs("mail")
    run_jobs()
    b.refresh_from_db()
    assert b.pending == 0 and b.finished_at is not None
    assert records("then") == 1
