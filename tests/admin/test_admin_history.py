"""The job history in the admin: the list with its filters, a record's timeline, and
encrypted arguments kept as ciphertext in the history's table and redacted on its pages
unless the user may read them."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import Permission
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from laterite_django.models import JobRecord
from laterite_django.testing import run_jobs
from tests.testapp import jobs
from tests.testapp.encrypted_jobs import broken, every

pytestmark = pytest.mark.django_db(transaction=True)  # jobs run as a worker runs them

EMAIL = "dora.private@example.com"
TOKEN = "tok-history-93f1"
LIST = "admin:laterite_django_jobrecord_changelist"


@pytest.fixture(autouse=True)
def history_on(settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    settings.LATERITE_QUEUE_HISTORY = {"keep": "7d"}


@pytest.fixture
def staff(client, django_user_model):
    def login(*codenames: str):
        user = django_user_model.objects.create_user("staff", is_staff=True)
        user.user_permissions.set(Permission.objects.filter(
            content_type__app_label="laterite_django", codename__in=codenames))
        client.force_login(user)
        return client

    return login


def url(view: str, pk: int) -> str:
    return reverse(f"admin:laterite_django_jobrecord_{view}", args=[pk])


def rows(client, **query: str) -> str:
    """The list's table of results (not its filters' sidebar), as HTML."""
    page = client.get(reverse(LIST), query).content.decode()
    start = page.find('id="result_list"')
    found = page[start : page.find("</table>", start)] if start >= 0 else ""
    return found.replace("<wbr>", "")


def ran() -> dict[str, JobRecord]:
    jobs.add.push(1, 2)
    jobs.mail.push("hello")
    broken.push(EMAIL, {"token": TOKEN})
    every.push(1, EMAIL, token=TOKEN)
    run_jobs()
    return {r.name: r for r in JobRecord.objects.all()}


def test_the_list_filters_by_name_queue_status_and_time(staff):
    records = ran()
    client = staff("view_jobrecord")
    page = rows(client)
    for name in ("tests.add", "tests.mail", "tests.enc.broken", "tests.enc.every"):
        assert name in page
    failed = rows(client, status="failed")
    assert "tests.enc.broken" in failed and "tests.add" not in failed
    mail = rows(client, queue="mail")
    assert "tests.mail" in mail and "tests.add" not in mail
    named = rows(client, name="tests.add")
    assert "tests.add" in named and "tests.mail" not in named
    finished = records["tests.add"].finished_at
    day = str(finished.replace(hour=0, minute=0, second=0, microsecond=0))  # as the links
    assert "tests.add" in rows(client, finished_at__gte=day)
    assert rows(client, finished_at__lt=day) == ""  # none finished before today
    found = rows(client, q=str(records["tests.mail"].job_id))
    assert "tests.mail" in found and "tests.add" not in found


def test_a_record_shows_its_timeline(staff):
    record = ran()["tests.add"]
    page = staff("view_jobrecord").get(url("change", record.pk)).content.decode()
    for step in ("pushed", "attempt 1", "succeeded", "waited", "ran"):
        assert step in page, step
    assert record.worker in page
    assert page.count('class="laterite-attempt"') == 1


def test_the_timeline_shows_each_attempt_on_its_own_line(staff):
    """A job that failed twice, then succeeded: three attempt lines, each with its
    worker and error; an attempt missing from the log shows as a gap."""
    jobs.flaky.push("timeline", 3)
    run_jobs()
    record = JobRecord.objects.get()
    client = staff("view_jobrecord")
    page = client.get(url("change", record.pk)).content.decode()
    assert page.count('class="laterite-attempt"') == 3
    for number in (1, 2, 3):
        assert f"attempt {number}</th>" in page
    first, second = page.index("flaky attempt 1"), page.index("flaky attempt 2")
    assert page.index("attempt 1</th>") < first < page.index("attempt 2</th>") < second
    assert page.index("attempt 3</th>") > second
    assert page.count(record.worker) >= 3
    # Attempt 2 not in the log (given back unfinished, say): shown as a gap.
    record.attempt_log = [record.attempt_log[0], record.attempt_log[2]]
    record.save(update_fields=["attempt_log"])
    page = client.get(url("change", record.pk)).content.decode()
    assert page.count('class="laterite-attempt"') == 2
    assert "1 attempt not kept" in page


def test_encrypted_arguments_stay_ciphertext_and_are_redacted(staff):
    records = ran()
    with connection.cursor() as cursor:
        cursor.execute("SELECT * FROM laterite_job_record")
        stored = repr(cursor.fetchall())
    assert EMAIL not in stored and TOKEN not in stored
    assert records["tests.enc.every"].encrypted["ct"]  # the ciphertext is kept
    assert records["tests.enc.every"].kwargs == {"token": "[encrypted]"}
    client = staff("view_jobrecord")
    html = "\n".join(client.get(url("change", r.pk)).content.decode()
                     for r in records.values())
    html += client.get(reverse(LIST)).content.decode()
    assert EMAIL not in html and TOKEN not in html
    assert "[encrypted]" in html and "stored encrypted" in html
    assert client.get(url("arguments", records["tests.enc.every"].pk)).status_code == 403


def test_with_the_permission_they_are_decrypted_on_demand(staff):
    record = ran()["tests.enc.every"]
    client = staff("view_jobrecord", "view_job_arguments")
    page = client.get(url("change", record.pk)).content.decode()
    assert url("arguments", record.pk) in page
    shown = client.get(url("arguments", record.pk)).content.decode()
    assert EMAIL in shown and TOKEN in shown


def test_records_cannot_be_added_changed_or_deleted(staff):
    record = ran()["tests.add"]
    client = staff("view_jobrecord", "change_jobrecord", "delete_jobrecord")
    assert client.get(url("delete", record.pk)).status_code == 403
    assert client.get(reverse("admin:laterite_django_jobrecord_add")).status_code == 403


def test_the_queue_filter_offers_the_records_queues_without_counting_the_job_tables(staff):
    ran()
    jobs.low.push("waits")  # a queue with a waiting job but no record
    client = staff("view_jobrecord")
    with CaptureQueriesContext(connection) as captured:
        page = client.get(reverse(LIST)).content.decode()
    sidebar = page[page.find('id="changelist-filter"'):]
    assert "?queue=mail" in sidebar and "?queue=default" in sidebar
    assert "?queue=low" not in sidebar
    # The summary's counts read every row of the job and failed tables: not here.
    read = [q["sql"] for q in captured.captured_queries
            if re.search(r'\blaterite_(job|failed_job)\b(?!_)', q["sql"])]
    assert read == []
