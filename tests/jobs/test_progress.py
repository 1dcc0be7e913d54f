"""cx.progress in a real worker: seen by queue_status (and the admin) while the job runs."""

from __future__ import annotations

import json

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from laterite_django.core.progress import Progress
from laterite_django.models import Job
from tests.conftest import wait_for
from tests.testapp import jobs
from tests.testapp.models import Record


def status(workers) -> str:
    return workers.command("queue_status").stdout


@pytest.mark.slow
def test_queue_status_shows_a_running_jobs_progress(workers):
    pushed = jobs.progressing.push(4)
    proc = workers.start("--stop-when-empty")
    text = wait_for(lambda: "first step" in (out := status(workers)) and out, timeout=30)
    assert f"#{pushed.id} tests.progressing on default (attempt 1, " in text
    assert text.rstrip().endswith("1/4 (25%) first step")
    data = json.loads(workers.command("queue_status", "--json").stdout)
    [running] = data["default"]["running_jobs"]
    assert running["id"] == pushed.id
    assert running["progress"]["done"] == 1 and running["progress"]["total"] == 4
    if workers.store_kind == "database":  # the admin's Jobs list reads the job table
        row = Job.objects.get(pk=pushed.id)
        assert Progress.parse(row.progress, row.token).note == "first step"
        client = Client()
        client.force_login(User.objects.create_superuser("admin", "a@example.com", "pw"))
        html = client.get(reverse("admin:laterite_django_job_changelist")).content.decode()
        assert '<progress max="1" value="0.250"></progress> 1/4 (25%) first step' in html
    Record.objects.create(kind="go")
    proc.wait(timeout=30)
    assert proc.returncode == 0
    assert Record.objects.filter(kind="progressed").count() == 1
    assert "progress of running jobs" not in status(workers)


def test_progress_refuses_what_is_not_a_number():
    from django.utils import timezone

    from laterite_django import JobContext

    cx = JobContext(id=1, name="x", queue="default", attempt=1, pushed_at=timezone.now())
    cx.progress(1, 2, "fine")  # kept nowhere: no worker
    for bad in ("1", None, float("nan"), True):
        with pytest.raises(TypeError, match="done must be a finite number"):
            cx.progress(bad)
    with pytest.raises(TypeError, match="note must be a str"):
        cx.progress(1, note=3)
