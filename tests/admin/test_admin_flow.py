"""Flow control in the admin: pause and resume from the queue summary, cancel from the
Jobs list; both need the change permission on jobs (a forged POST gets 403)."""

from __future__ import annotations

import pytest
from django.urls import reverse

from laterite_django.models import FailedJob, Job
from laterite_django.stores import get_store
from tests.admin.test_admin import JOBS, action_names, make_job, texts
from tests.admin.test_admin import staff as staff  # the fixture

pytestmark = pytest.mark.django_db

PAUSE = reverse("admin:laterite_django_job_pause")


def test_pause_and_resume_from_the_summary(admin_client):
    make_job()
    html = admin_client.get(JOBS).content.decode()
    assert f'action="{PAUSE}"' in html and 'value="pause"' in html
    response = admin_client.post(PAUSE, {"queue": "default", "do": "pause"}, follow=True)
    assert texts(response)[0].startswith("Queue 'default' paused")
    assert get_store().paused_queues() == {"default"}
    html = admin_client.get(JOBS).content.decode()
    assert 'data-paused="1"' in html and 'value="resume"' in html
    response = admin_client.post(PAUSE, {"queue": "default", "do": "resume"}, follow=True)
    assert texts(response) == ["Queue 'default' resumed."]
    assert get_store().paused_queues() == set()
    assert admin_client.get(PAUSE).status_code == 405
    assert admin_client.post(PAUSE, {"queue": "default", "do": "explode"}).status_code == 400


def test_cancel_from_the_jobs_list(admin_client):
    waiting, delayed = make_job(), make_job("delayed")
    assert "cancel_selected" in action_names(admin_client.get(JOBS))
    data = {"action": "cancel_selected", "_selected_action": [waiting.pk, delayed.pk],
            "index": "0"}
    response = admin_client.post(JOBS, data, follow=True)
    assert texts(response) == ["2 waiting jobs cancelled: on the failed list now."]
    assert not Job.objects.exists()
    assert set(FailedJob.objects.values_list("job_id", flat=True)) == {waiting.pk, delayed.pk}
    response = admin_client.post(JOBS, data, follow=True)
    assert texts(response) == ["2 jobs were no longer waiting or running: nothing changed."]


def test_pause_and_cancel_need_change_on_job(staff):
    client = staff("view_job", "view_failedjob")
    job = make_job()
    html = client.get(JOBS).content.decode()
    assert 'value="pause"' not in html
    assert client.post(PAUSE, {"queue": "default", "do": "pause"}).status_code == 403
    forged = {"action": "cancel_selected", "_selected_action": [job.pk], "index": "0"}
    assert client.post(JOBS, forged).status_code == 403
    assert get_store().paused_queues() == set()
    assert Job.objects.filter(pk=job.pk).exists()
