"""Django's Tasks framework on LateriteBackend, run by real `queue_work` processes.

What Django's own tests/tasks/ checks of a backend (results, errors, context,
signals, priority, run_after, queues), against every store.
"""

from __future__ import annotations

import pytest

pytest.importorskip(
    "laterite_django.tasks.compat",
    reason="needs Django's Tasks framework: Django 6+, or the django-tasks backport",
    exc_type=ImportError,
)

import signal
import time
from datetime import timedelta

from asgiref.sync import async_to_sync
from django.core.management import call_command
from django.db import transaction
from django.test import override_settings
from django.utils import timezone

import laterite_django
from laterite_django.models import FailedJob, Job, TaskResultRecord
from laterite_django.tasks import LateriteBackend
from laterite_django.tasks.compat import (
    InvalidTask,
    TaskResultDoesNotExist,
    TaskResultMismatch,
    TaskResultStatus,
    task_backends,
    task_enqueued,
    task_finished,
    task_started,
)
from laterite_django.tasks.runner import TASK_JOB, task_job
from tests.conftest import wait_for
from tests.testapp import task_functions as tasks
from tests.testapp.models import Record
from tests.testapp.task_functions import TASK_OPTIONS
from tests.testapp.task_functions import __name__ as TASKS_MODULE
from tests.worker.test_processes import kill_tree

needs_task_options = pytest.mark.skipif(
    not TASK_OPTIONS, reason="this Django's @task does not pass keyword arguments on"
)


def drain(workers, *args: str) -> None:
    """Run one worker until no task is due; fail the test if it did not exit 0."""
    result = workers.run("--stop-when-empty", *args)
    assert result.returncode == 0, result.stderr


def signals_of(result_id: str) -> list[tuple[str, str, int]]:
    """The task signals a worker sent for this result, as (kind, status, attempts)."""
    return [
        (kind.removeprefix("signal-"), value.rsplit(":", 1)[1], attempt)
        for kind, value, attempt in Record.objects.filter(
            kind__startswith="signal-", value__startswith=f"{result_id}:"
        ).order_by("id").values_list("kind", "value", "attempt")
    ]


# -- enqueue and results, before any worker --------------------------------------


def test_enqueue_stores_a_job_and_a_ready_result(store):
    before = timezone.now()
    result = tasks.add.using(priority=7).enqueue(1, b=2)

    assert result.status == TaskResultStatus.READY
    assert result.is_finished is False
    assert result.task == tasks.add.using(priority=7)
    assert (result.args, result.kwargs) == ([1], {"b": 2})
    assert result.backend == "default"
    assert result.enqueued_at >= before
    assert (result.started_at, result.finished_at, result.last_attempted_at) == (None,) * 3
    assert (result.errors, result.worker_ids, result.attempts) == ([], [], 0)
    with pytest.raises(ValueError, match="Task has not finished yet"):
        _ = result.return_value

    # get_result (sync, async, and through the task) reads back the same result.
    assert task_backends["default"].get_result(result.id) == result
    assert tasks.add.get_result(result.id) == result
    assert async_to_sync(tasks.add.aget_result)(result.id) == result
    counts = store.counts()
    assert counts["default"].pending == 1
    if store_is_database(store):
        job = Job.objects.get()
        assert (job.name, job.queue, job.priority) == (TASK_JOB, "default", 7)
        assert TaskResultRecord.objects.get().job_id == str(job.pk)


def store_is_database(store) -> bool:
    return type(store).__name__ == "DatabaseStore"


def test_get_result_errors(store):
    result = tasks.add.enqueue(1, 2)
    with pytest.raises(TaskResultDoesNotExist):
        task_backends["default"].get_result("no-such-id")
    with pytest.raises(TaskResultDoesNotExist):
        async_to_sync(task_backends["default"].aget_result)("no-such-id")
    with pytest.raises(TaskResultMismatch, match="Task does not match"):
        tasks.echo.get_result(result.id)


def test_enqueue_rejects_arguments_that_are_not_json(store):
    with pytest.raises(TypeError, match="Unsupported type"):
        tasks.echo.enqueue(timezone.now())
    with pytest.raises(TypeError, match="Unsupported type"):
        async_to_sync(tasks.echo.aenqueue)(object())
    assert not TaskResultRecord.objects.exists()


def test_task_enqueued_signal(store):
    seen = []

    def receiver(sender, task_result, **kwargs):
        seen.append((sender, task_result.id, task_result.status))

    task_enqueued.connect(receiver)
    try:
        result = tasks.noop.enqueue()
        aresult = async_to_sync(tasks.noop.aenqueue)(1)
    finally:
        task_enqueued.disconnect(receiver)
    assert seen == [
        (LateriteBackend, result.id, TaskResultStatus.READY),
        (LateriteBackend, aresult.id, TaskResultStatus.READY),
    ]


# -- a real worker ----------------------------------------------------------------


def test_worker_runs_tasks_and_records_results(workers):
    results = [
        tasks.add.enqueue(2, 3),
        async_to_sync(tasks.add_async.aenqueue)(4, b=5),
        tasks.echo.enqueue({"list": [1, 2.5, None, True], "text": "é"}),
        tasks.noop_async.enqueue(),
        tasks.with_context.enqueue("ctx"),
    ]
    # A task pushed as a plain job (as `queue_push laterite.task` would) has no result.
    bare = task_job().push(task=f"{TASKS_MODULE}.add", args=[1], kwargs={"b": 1})
    drain(workers)
    assert signals_of(f"job:{bare.id}") == [
        ("started", "RUNNING", 1), ("finished", "SUCCESSFUL", 1)]

    for result in results:
        result.refresh()
        assert result.status == TaskResultStatus.SUCCESSFUL, result.errors
        assert result.is_finished
        assert result.enqueued_at <= result.started_at <= result.finished_at
        assert result.last_attempted_at == result.started_at
        assert result.errors == []
        assert len(result.worker_ids) == result.attempts == 1
        assert signals_of(result.id) == [("started", "RUNNING", 1), ("finished", "SUCCESSFUL", 1)]
    add, add_async, echo, noop_async, context = results
    assert add.return_value == 5
    assert add_async.return_value == 9
    assert echo.return_value == {"list": [1, 2.5, None, True], "text": "é"}
    assert noop_async.return_value is None
    assert context.return_value == {"id": context.id, "attempt": 1, "value": "ctx"}
    assert async_to_sync(task_backends["default"].aget_result)(add.id) == add
    assert not Job.objects.exists() or not store_is_database_kind(workers)


def store_is_database_kind(workers) -> bool:
    return workers.store_kind == "database"


def test_errors_retries_and_the_failed_list(workers):
    failing = tasks.failing.enqueue("boom")  # OPTIONS: 2 tries, no backoff
    flaky = tasks.flaky.enqueue("f", 2)
    exits = tasks.exits.enqueue()
    fails_now = tasks.fails_now.enqueue("x")
    bad_return = tasks.bad_return.enqueue()
    drain(workers)

    failing.refresh()
    assert failing.status == TaskResultStatus.FAILED
    assert failing.is_finished
    with pytest.raises(ValueError, match="Task failed"):
        _ = failing.return_value
    assert failing.attempts == 2
    assert [e.exception_class for e in failing.errors] == [ValueError, ValueError]
    assert failing.errors[-1].traceback.endswith("ValueError: boom\n")
    assert failing.started_at <= failing.last_attempted_at <= failing.finished_at
    # task_finished comes once, after the last attempt.
    assert signals_of(failing.id) == [
        ("started", "RUNNING", 1), ("started", "RUNNING", 2), ("finished", "FAILED", 2)]

    flaky.refresh()
    assert flaky.status == TaskResultStatus.SUCCESSFUL
    assert flaky.return_value == 2  # the attempt its TaskContext reported
    assert [e.exception_class for e in flaky.errors] == [RuntimeError]
    assert "flaky attempt 1" in flaky.errors[0].traceback
    assert list(Record.objects.filter(kind="flaky").values_list("attempt", flat=True)) == [1, 2]

    exits.refresh()
    assert exits.status == TaskResultStatus.FAILED
    assert exits.errors[-1].exception_class is SystemExit

    # Fail and a return value that is not JSON end the task at once.
    fails_now.refresh()
    assert (fails_now.status, fails_now.attempts) == (TaskResultStatus.FAILED, 1)
    assert fails_now.errors[0].exception_class_path == "laterite_django.exceptions.Fail"
    bad_return.refresh()
    assert (bad_return.status, bad_return.attempts) == (TaskResultStatus.FAILED, 1)
    assert bad_return.errors[0].exception_class is TypeError
    assert "Unsupported type" in bad_return.errors[0].traceback

    failed = {row.error.split("\n", 1)[0] for row in FailedJob.objects.all()}
    assert FailedJob.objects.filter(name=TASK_JOB).count() == 4
    assert "ValueError: boom" in failed  # as any job records it


def test_a_failure_settled_by_the_worker_is_logged_with_its_traceback(workers):
    tasks.failing.enqueue("boom")  # OPTIONS: 2 tries; the second settles it as failed
    result = workers.run("--stop-when-empty")
    assert result.returncode == 0, result.stderr
    # Django's task_finished handler logs a failure with logger.exception.
    logged = result.stderr.split("state=FAILED", 1)[1]
    assert "NoneType: None" not in logged
    assert "Traceback (most recent call last)" in logged
    assert "ValueError: boom" in logged and "task_functions.py" in logged


def test_a_failure_whose_text_no_database_keeps_is_recorded_escaped(workers):
    """A task's traceback goes into its result's errors as the job's error goes into
    the failed list: a NUL and a lone surrogate escaped, not refused by the database
    (which left the result READY while the job was failed)."""
    result = tasks.failing_unstorably.enqueue("bad text")
    drain(workers)
    result.refresh()
    assert (result.status, result.attempts) == (TaskResultStatus.FAILED, 2)
    assert all("ValueError: bad text\\x00\\ud800" in error.traceback
               for error in result.errors)
    assert "bad text\\x00\\ud800" in FailedJob.objects.get().error


@needs_task_options
def test_failed_task_retried_from_the_failed_list(workers):
    result = tasks.fails_first_time.enqueue("a")  # @task(tries=1)
    drain(workers)
    result.refresh()
    assert (result.status, result.attempts) == (TaskResultStatus.FAILED, 1)
    failed = FailedJob.objects.get()
    assert "first time for a" in failed.error

    call_command("queue_retry", str(failed.pk), stdout=_Out())
    drain(workers)
    result.refresh()
    assert result.status == TaskResultStatus.SUCCESSFUL
    assert result.return_value == "ok a"
    assert result.attempts == 2 and len(result.errors) == 1
    assert not FailedJob.objects.exists()


@needs_task_options
def test_task_options_from_the_decorator(workers):
    four = tasks.flaky_four.enqueue("x", 4)  # tries=4 beats the OPTIONS' 2
    slow = tasks.too_slow.enqueue(5)  # timeout=0.5, tries=1
    drain(workers)
    four.refresh()
    assert (four.status, four.return_value, four.attempts) == (TaskResultStatus.SUCCESSFUL, 4, 4)
    slow.refresh()
    assert (slow.status, slow.attempts) == (TaskResultStatus.FAILED, 1)
    assert slow.errors[0].exception_class_path == "laterite_django.worker.execute.JobTimeout"
    assert not Record.objects.filter(kind="slow-end").exists()


@needs_task_options
def test_a_task_stuck_in_c_is_killed_by_the_supervisor_past_its_timeout(workers):
    stuck = tasks.stuck_in_c.enqueue(120)  # timeout=0.5, tries=1
    try:
        drain(workers, "--processes", "2")
    finally:
        for proc in workers.procs:
            kill_tree(proc)
    stuck.refresh()
    assert (stuck.status, stuck.attempts) == (TaskResultStatus.FAILED, 1)
    assert stuck.errors[0].exception_class_path == "laterite_django.worker.execute.JobTimeout"
    assert "it did not stop, so its worker process" in stuck.errors[0].traceback
    assert not Record.objects.filter(kind="stuck-task-end").exists()


@needs_task_options
def test_a_cancelled_task_stuck_in_c_is_killed_by_the_supervisor_past_its_grace(workers):
    stuck = tasks.stuck_in_c_untimed.enqueue(120)  # no timeout, tries=3
    proc = workers.start("--processes", "2")
    try:
        wait_for(lambda: Record.objects.filter(kind="stuck-task-start").exists())
        assert laterite_django.cancel(int(TaskResultRecord.objects.get().job_id)) == "asked"
        # The supervisor settles the job, then records the task's result.
        wait_for(lambda: TaskResultRecord.objects.filter(status="FAILED").exists(),
                 timeout=30)
    finally:
        kill_tree(proc)
    assert FailedJob.objects.count() == 1
    stuck.refresh()
    assert (stuck.status, stuck.attempts) == (TaskResultStatus.FAILED, 1)
    assert stuck.errors[0].exception_class_path == "laterite_django.exceptions.Cancelled"
    assert "it did not stop, so its worker process" in stuck.errors[0].traceback
    assert Record.objects.filter(kind="stuck-task-start").count() == 1


@needs_task_options
def test_unique_key_returns_the_waiting_result(workers):
    first = tasks.unique_per_user.enqueue(7)
    again = tasks.unique_per_user.enqueue(7)
    other = tasks.unique_per_user.enqueue(8)
    assert again.id == first.id
    assert other.id != first.id
    with transaction.atomic():
        # A store that cannot join the transaction pushes at the commit: the
        # duplicate's result goes then.
        tasks.unique_per_user.enqueue(7)
    assert TaskResultRecord.objects.count() == 2
    drain(workers)
    assert sorted(Record.objects.filter(kind="unique-task").values_list("value", flat=True)) == [
        "7", "8"]
    later = tasks.unique_per_user.enqueue(7)  # nothing waits now: queued anew
    assert later.id != first.id


def test_enqueue_commits_or_rolls_back_with_the_transaction(workers):
    with transaction.atomic():
        kept = tasks.record.enqueue("kept")
    with pytest.raises(RuntimeError, match="roll back"), transaction.atomic():
        tasks.record.enqueue("dropped")
        raise RuntimeError("roll back")
    drain(workers)
    assert list(TaskResultRecord.objects.values_list("pk", "status")) == [
        (kept.id, "SUCCESSFUL")]
    assert list(Record.objects.filter(kind="task").values_list("value", flat=True)) == ["kept"]


def test_priority_higher_first_and_queues(workers):
    for priority in [-100, 0, 50, 100, -5]:
        tasks.record.using(priority=priority).enqueue(str(priority))
    mail = tasks.record_mail.enqueue("m")
    drain(workers, "--queue", "default")
    ran = list(Record.objects.filter(kind="task").order_by("id").values_list("value", flat=True))
    assert ran == ["100", "50", "0", "-5", "-100"]
    mail.refresh()
    assert mail.status == TaskResultStatus.READY  # not on the worker's queue
    drain(workers, "--queue", "mail")
    mail.refresh()
    assert mail.status == TaskResultStatus.SUCCESSFUL


def test_run_after(workers):
    much_later = timezone.now() + timedelta(hours=1)
    waiting = tasks.record.using(run_after=much_later).enqueue("later")
    due = tasks.record.enqueue("now")
    drain(workers)
    waiting.refresh()
    due.refresh()
    assert due.status == TaskResultStatus.SUCCESSFUL
    assert waiting.status == TaskResultStatus.READY
    assert waiting.task.run_after == much_later

    soon = timezone.now() + timedelta(seconds=1)
    result = tasks.record.using(run_after=soon).enqueue("soon")
    workers.start()
    wait_for(lambda: TaskResultRecord.objects.filter(pk=result.id, status="SUCCESSFUL").exists())
    result.refresh()
    assert result.started_at >= soon


def test_a_second_stop_signal_gives_the_task_back(workers):
    result = tasks.nap.enqueue(30, "stopped")
    worker = workers.start()
    wait_for(lambda: Record.objects.filter(kind="nap-start").exists())
    worker.send_signal(signal.SIGTERM)
    time.sleep(0.3)
    worker.send_signal(signal.SIGINT)  # a second signal stops now: the attempt does not count
    assert worker.wait(20) == 0
    result.refresh()
    assert (result.status, result.worker_ids, result.errors) == (TaskResultStatus.READY, [], [])
    assert not Record.objects.filter(kind="nap-end").exists()
    assert signals_of(result.id) == [("started", "RUNNING", 1)]


def test_results_expire_and_are_pruned(workers):
    kept = tasks.add.enqueue(1, 1)
    pruned = tasks.add.enqueue(2, 2)
    waiting = tasks.add.using(run_after=timezone.now() + timedelta(hours=1)).enqueue(3, 3)
    drain(workers)
    row = TaskResultRecord.objects.get(pk=kept.id)
    assert row.expires_at == row.finished_at + timedelta(seconds=3600)  # RESULT_TTL
    assert TaskResultRecord.objects.get(pk=waiting.id).expires_at is None
    TaskResultRecord.objects.filter(pk=pruned.id).update(expires_at=timezone.now())

    call_command("queue_prune_results", "--dry-run", stdout=(out := _Out()))
    assert "1 task result expired would be deleted" in out.text
    call_command("queue_prune_results", stdout=(out := _Out()))
    assert "1 task result expired deleted" in out.text
    with pytest.raises(TaskResultDoesNotExist):
        tasks.add.get_result(pruned.id)
    assert tasks.add.get_result(kept.id).return_value == 2

    call_command("queue_prune_results", "--older-than", "0", "--no-input", stdout=_Out())
    assert list(TaskResultRecord.objects.values_list("pk", flat=True)) == [waiting.id]


class _Out:
    def __init__(self) -> None:
        self.text = ""

    def write(self, text: str) -> None:
        self.text += text

    def flush(self) -> None:
        pass


# -- inline mode, in this process ------------------------------------------------


def test_inline_mode_runs_at_enqueue(store):
    seen = []

    def receiver(signal_name):
        def record(sender, task_result, **kwargs):
            seen.append((signal_name, task_result.status))
        return record

    receivers = {
        "enqueued": receiver("enqueued"),
        "started": receiver("started"),
        "finished": receiver("finished"),
    }
    task_enqueued.connect(receivers["enqueued"])
    task_started.connect(receivers["started"])
    task_finished.connect(receivers["finished"])
    try:
        with override_settings(LATERITE_QUEUE_MODE="inline"):
            result = tasks.with_context.enqueue("inline")
            with pytest.raises(ValueError, match="inline boom"):
                tasks.failing.enqueue("inline boom")
    finally:
        task_enqueued.disconnect(receivers["enqueued"])
        task_started.disconnect(receivers["started"])
        task_finished.disconnect(receivers["finished"])
    assert result.status == TaskResultStatus.SUCCESSFUL
    assert result.return_value == {"id": result.id, "attempt": 1, "value": "inline"}
    assert tasks.with_context.get_result(result.id) == result
    assert seen[:3] == [
        ("enqueued", TaskResultStatus.READY),
        ("started", TaskResultStatus.RUNNING),
        ("finished", TaskResultStatus.SUCCESSFUL),
    ]
    assert seen[-1] == ("finished", TaskResultStatus.FAILED)
    assert not Job.objects.exists()


def test_a_reclaimed_task_past_its_tries_fails_without_running(store, workers):
    from laterite_django.core.rules import lost_reason

    result = tasks.record.enqueue("lost")
    for _ in range(3):  # claimed by three workers that each died mid-run
        assert store.claim(["default"], "dead", 1)
        store.requeue_abandoned(-1, lost_reason(90))
    run = workers.run("--stop-when-empty")
    assert run.returncode == 0, run.stderr
    result.refresh()
    assert result.status == TaskResultStatus.FAILED
    assert result.errors[0].exception_class_path == "laterite_django.tasks.results.WorkerLost"
    assert "; no tries left (" in result.errors[0].traceback
    assert not Record.objects.filter(kind="task").exists()
    assert FailedJob.objects.get().error.startswith("worker lost: its claim expired")


def test_same_code_on_the_immediate_backend(db):
    result = tasks.add.using(backend="immediate").enqueue(20, 22)
    assert result.status == TaskResultStatus.SUCCESSFUL
    assert result.return_value == 42
    assert not TaskResultRecord.objects.exists()


def test_unknown_queue_is_invalid():
    with pytest.raises(InvalidTask, match="Queue 'nope' is not valid for backend"):
        tasks.record.using(queue_name="nope")


def test_a_task_may_snooze_without_spending_a_try(workers):
    """A task that raises Snooze runs again later, its tries unchanged, and no error is
    recorded for the snoozes."""
    result = tasks.snoozing.enqueue("z", 3)
    drain(workers)
    result.refresh()
    assert result.status == TaskResultStatus.SUCCESSFUL, result.errors
    assert result.return_value == "z"
    assert result.errors == []
    assert Record.objects.filter(kind="task-snoozing").count() == 4
    assert not FailedJob.objects.exists()
