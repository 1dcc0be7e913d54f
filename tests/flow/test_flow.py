"""Flow control through real workers, on every store: pause and resume a queue, cancel
waiting, delayed and running jobs (issue 12)."""

from __future__ import annotations

import json
import time
from datetime import timedelta

import pytest
from django.utils import timezone

import laterite_django
from laterite_django.core.cancel import Outcome
from laterite_django.flow.cancel import GRACE
from laterite_django.models import FailedJob
from tests.conftest import Stderr, wait_for
from tests.testapp import jobs
from tests.testapp.models import Record

pytestmark = pytest.mark.django_db(transaction=True)


def starts(kind: str = "flow-start"):
    return Record.objects.filter(kind=kind)


def test_pause_under_load_stops_every_worker_and_resume_drains(store, workers):
    from django.conf import settings

    poll = settings.LATERITE_QUEUE_POLL
    jobs.flow_stamp.push_many([(str(i), 0.1) for i in range(400)])
    procs = [workers.start("--queue", "default", "--processes", "2") for _ in range(2)]
    errors = [Stderr(p) for p in procs]
    wait_for(lambda: starts().count() >= 10)
    done = workers.command("queue_pause", "default")
    assert done.returncode == 0, done.stderr
    paused_at = timezone.now()
    assert store.paused_queues() == {"default"}
    # Every worker stops claiming within the poll interval (plus the job in hand).
    time.sleep(poll + 2)
    cutoff = paused_at + timedelta(seconds=poll + 0.5)
    assert not starts().filter(at__gt=cutoff).exists()
    before = starts().count()
    assert before < 400
    # Pushes are still accepted; queue_status shows the pause.
    jobs.flow_stamp.push("late", 0.0)
    status = json.loads(workers.command("queue_status", "--json").stdout)
    assert status["default"]["paused"] is True and status["default"]["waiting"] > 0
    assert "paused" in workers.command("queue_status").stdout
    time.sleep(0.5)
    assert starts().count() == before
    done = workers.command("queue_resume", "default")
    assert "Resumed: default." in done.stdout
    wait_for(lambda: Record.objects.filter(kind="flow-end").count() == 401, timeout=90)
    assert store.paused_queues() == set()
    for p in procs:
        p.terminate()
        p.wait(20)
    assert all("Traceback" not in e.text() for e in errors)


def test_pause_and_resume_from_python(store):
    laterite_django.pause_queue("mail", "low")
    laterite_django.pause_queue("mail")  # twice: still paused once
    assert store.paused_queues() == {"mail", "low"}
    laterite_django.resume_queue("low")
    assert store.paused_queues() == {"mail"}
    laterite_django.resume_queue("mail", "never-paused")
    assert store.paused_queues() == set()


def test_cancel_waiting_and_delayed_jobs_puts_them_on_the_failed_list(store, workers):
    waiting = jobs.record.push("w").id
    delayed = jobs.record.push_in(timedelta(hours=1), "d").id
    done = workers.command("queue_cancel", str(waiting), str(delayed))
    assert done.returncode == 0, done.stderr
    assert f"Job {waiting}: cancelled" in done.stdout
    assert f"Job {delayed}: cancelled" in done.stdout
    assert store.counts().get("default") is None or store.counts()["default"].total == 0
    failed = {f.job_id: f for f in FailedJob.objects.all()}
    assert set(failed) == {waiting, delayed}
    assert all(f.error.startswith("Cancelled") for f in failed.values())
    # Again: nothing changes, and it says so.
    done = workers.command("queue_cancel", str(waiting))
    assert "nothing changed" in done.stdout
    assert FailedJob.objects.count() == 2
    # It can be retried from the failed list, and then runs.
    assert store.retry([failed[waiting].pk]) == 1
    workers.run("--stop-when-empty")
    assert Record.objects.filter(kind="record", value="w").count() == 1


def test_cancel_a_finished_job_changes_nothing(store, workers):
    job_id = jobs.record.push("x").id
    workers.run("--stop-when-empty")
    assert laterite_django.cancel(job_id) == Outcome.FINISHED
    assert not FailedJob.objects.exists()


def test_cancel_a_cooperative_running_job(store, workers):
    job_id = jobs.flow_coop.push("c").id
    proc = workers.start()
    wait_for(lambda: starts("coop-start").exists())
    assert laterite_django.cancel(job_id) == Outcome.ASKED
    failed = wait_for(lambda: FailedJob.objects.filter(job_id=job_id).first(), timeout=GRACE + 10)
    assert failed.error.startswith("Cancelled: while it ran")
    assert starts("coop-saw").count() == 1  # it saw cx.cancelled and stopped by itself
    time.sleep(0.5)
    assert starts("coop-start").count() == 1  # never retried by itself
    proc.terminate()
    proc.wait(20)


def test_a_job_cancelled_while_it_runs_is_not_retried_even_before_its_first_look(
        store, workers):
    job_id = jobs.flow_brief.push("b").id  # fails within 0.8 s; 3 tries, no backoff
    proc = workers.start()
    wait_for(lambda: starts("brief-start").exists(), every=0.01)
    assert laterite_django.cancel(job_id) == Outcome.ASKED
    Record.objects.create(kind="brief-go", value="")
    failed = wait_for(lambda: FailedJob.objects.filter(job_id=job_id).first(), timeout=30)
    assert failed.error.startswith("Cancelled: while it ran")
    assert "RuntimeError: brief" in failed.error
    time.sleep(0.5)
    assert starts("brief-start").count() == 1  # the retry never ran
    proc.terminate()
    proc.wait(20)


def test_cancel_a_job_that_never_checks_interrupts_it_after_the_grace(store, workers):
    job_id = jobs.flow_spin.push("s").id
    jobs.record.push("after")
    proc = workers.start()
    wait_for(lambda: starts("spin-start").exists())
    done = workers.command("queue_cancel", str(job_id))
    assert f"Job {job_id}: running" in done.stdout
    failed = wait_for(lambda: FailedJob.objects.filter(job_id=job_id).first(), timeout=GRACE + 10)
    assert failed.error.startswith("Cancelled: while it ran")
    # The worker lives on and takes the next job.
    wait_for(lambda: Record.objects.filter(kind="record", value="after").exists())
    assert starts("spin-start").count() == 1
    proc.terminate()
    proc.wait(20)


def test_the_rules_turn_only_a_retry_of_a_cancelled_job_into_a_fail():
    from laterite_django.core.rules import Action, Decision, cancelled_instead

    retry = Decision(Action.RELEASE, "ValueError: x", at=timezone.now(), delay=0.0)
    assert cancelled_instead(retry) == Decision(Action.FAIL,
                                                "Cancelled: while it ran\n\nValueError: x")
    for other in (Decision(Action.DELETE), Decision(Action.FAIL, "e"),
                  Decision(Action.GIVE_BACK, "")):
        assert cancelled_instead(other) is other
