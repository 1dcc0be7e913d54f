"""The admin and encrypted arguments: redacted, unless the user may read them decrypted."""

from __future__ import annotations

import logging

import pytest
from django.contrib.auth.models import Permission
from django.urls import reverse

from laterite_django.models import FailedJob, Job
from laterite_django.testing import run_jobs
from tests.testapp.encrypted_jobs import broken, every

pytestmark = pytest.mark.django_db(transaction=True)  # jobs run as a worker runs them

EMAIL = "carol.private@example.com"
TOKEN = "tok-admin-51d2"
VIEWING = ("view_job", "view_failedjob")


@pytest.fixture(autouse=True)
def fast_passwords(settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def staff(client, django_user_model):
    """Log in a staff user holding exactly the named permissions."""

    def login(*codenames: str):
        user = django_user_model.objects.create_user("staff", is_staff=True)
        user.user_permissions.set(Permission.objects.filter(
            content_type__app_label="laterite_django", codename__in=codenames))
        client.force_login(user)
        return client

    return login


def url(model: str, view: str, pk: int) -> str:
    return reverse(f"admin:laterite_django_{model}_{view}", args=[pk])


def pages(client) -> str:
    """The lists and every job's and failed job's page, as one text."""
    html = [client.get(reverse("admin:laterite_django_job_changelist")).content.decode(),
            client.get(reverse("admin:laterite_django_failedjob_changelist")).content.decode()]
    for pk in Job.objects.values_list("pk", flat=True):
        html.append(client.get(url("job", "change", pk)).content.decode())
    for pk in FailedJob.objects.values_list("pk", flat=True):
        html.append(client.get(url("failedjob", "change", pk)).content.decode())
    return "\n".join(html)


def push_one_waiting_and_one_failed() -> tuple[Job, FailedJob]:
    broken.push(EMAIL, {"token": TOKEN})
    run_jobs()
    every.push(1, EMAIL, token=TOKEN)
    return Job.objects.get(), FailedJob.objects.get()


def test_without_the_permission_every_page_shows_them_redacted(staff):
    job, failed = push_one_waiting_and_one_failed()
    client = staff(*VIEWING)
    html = pages(client)
    assert EMAIL not in html and TOKEN not in html
    assert "[encrypted]" in html and "[redacted]" in html  # the payload, the error
    assert "stored encrypted" in html and "Show them decrypted" not in html
    assert client.get(url("job", "arguments", job.pk)).status_code == 403
    assert client.get(url("failedjob", "arguments", failed.pk)).status_code == 403


def test_with_the_permission_they_are_decrypted_on_demand_and_the_view_logged(
        staff, caplog):
    job, failed = push_one_waiting_and_one_failed()
    client = staff(*VIEWING, "view_job_arguments")
    page = client.get(url("job", "change", job.pk)).content.decode()
    assert EMAIL not in page and url("job", "arguments", job.pk) in page
    caplog.set_level(logging.INFO, logger="laterite.admin")
    shown = client.get(url("job", "arguments", job.pk)).content.decode()
    assert EMAIL in shown and TOKEN in shown and "is logged" in shown
    shown = client.get(url("failedjob", "arguments", failed.pk)).content.decode()
    assert EMAIL in shown and TOKEN in shown
    viewed = [r for r in caplog.records if getattr(r, "action", "") == "arguments_viewed"]
    assert [(r.user_id, r.job_id) for r in viewed] == [
        (job_user(client), job.pk), (job_user(client), failed.pk)]
    assert "staff" in viewed[0].getMessage()


def job_user(client) -> int:
    return int(client.session["_auth_user_id"])
