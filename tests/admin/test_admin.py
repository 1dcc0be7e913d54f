"""The admin through Django's test client: lists, filters, detail pages, actions, permissions."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from datetime import datetime, timedelta

import pytest
from django.contrib.auth.models import Permission
from django.contrib.messages import get_messages
from django.db import connection
from django.urls import reverse
from django.utils import timezone
from django.utils.formats import date_format
from django.utils.http import urlencode

from laterite_django.admin import summary as admin_summary
from laterite_django.models import FailedJob, Job
from laterite_django.stores.database.sql import IDLE_LOCK
from tests.conftest import wait_for
from tests.testapp import jobs
from tests.testapp.models import Record

pytestmark = pytest.mark.django_db

JOBS = reverse("admin:laterite_django_job_changelist")
FAILED = reverse("admin:laterite_django_failedjob_changelist")


def job_url(view: str, pk: int) -> str:
    return reverse(f"admin:laterite_django_job_{view}", args=[pk])


def failed_url(view: str, pk: int) -> str:
    return reverse(f"admin:laterite_django_failedjob_{view}", args=[pk])


def make_job(state: str = "waiting", *, name: str = "tests.record", queue: str = "default",
             payload: dict | None = None, **fields) -> Job:
    """Store a Job row in `state` (waiting, delayed, running, abandoned)."""
    now = timezone.now()
    values = {
        "name": name,
        "queue": queue,
        "payload": json.dumps(payload or {"args": ["x"], "kwargs": {}}),
        "pushed_at": now - timedelta(minutes=5),
        "available_at": now - timedelta(seconds=1),
    }
    if state == "delayed":
        values["available_at"] = now + timedelta(hours=1)
    elif state in ("running", "abandoned"):
        values.update(token="t" * 32, claimed_by="host:1234",
                      claimed_at=now if state == "running" else now - timedelta(hours=1),
                      attempts=1)
    values.update(fields)
    return Job.objects.create(**values)


def make_failed(*, name: str = "tests.always_broken", queue: str = "default",
                error: str = "ValueError: broken\nTraceback (most recent call last):\n  ...",
                payload: dict | None = None, **fields) -> FailedJob:
    now = timezone.now()
    values = {
        "name": name,
        "queue": queue,
        "payload": json.dumps(payload or {"args": ["v"], "kwargs": {}}),
        "attempts": 2,
        "pushed_at": now - timedelta(minutes=10),
        "failed_at": now,
        "error": error,
    }
    values.update(fields)
    return FailedJob.objects.create(**values)


def texts(response) -> list[str]:
    return [str(m) for m in get_messages(response.wsgi_request)]


def ids(response) -> set[int]:
    return {obj.pk for obj in response.context["cl"].result_list}


def action_names(response) -> set[str]:
    form = response.context["action_form"]
    if form is None:
        return set()
    return {name for name, _ in form.fields["action"].choices if name}


@pytest.fixture(autouse=True)
def fast_passwords(settings):
    """Hash the test users' passwords cheaply: the admin, not PBKDF2, is under test."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def staff(client, django_user_model):
    """Log in a staff user holding exactly the named permissions (`change_failedjob`, ...)."""

    def login(*codenames: str):
        user = django_user_model.objects.create_user("staff", is_staff=True)
        user.user_permissions.set(Permission.objects.filter(
            content_type__app_label="laterite_django", codename__in=codenames))
        client.force_login(user)
        return client

    return login


# -- the Job list ---------------------------------------------------------------


def test_job_list_shows_every_state(admin_client):
    made = {state: make_job(state) for state in ("waiting", "delayed", "running", "abandoned")}
    response = admin_client.get(JOBS)
    assert response.status_code == 200
    html = response.content.decode()
    for state, job in made.items():
        assert re.search(rf'laterite-state-{state}"[^>]*>[^<]+</span>', html), state
        assert f'href="{job_url("change", job.pk)}' in html
    assert "running past retry_after" in html
    assert ids(response) == {job.pk for job in made.values()}
    for column in ("name", "queue", "state", "attempts", "due at"):
        assert f">{column.capitalize()}<" in html or f">{column}<" in html.lower(), column
    # Who claimed a running job shows in its state cell, free to wrap after ":".
    assert html.count('<span class="laterite-claimed-by" title="claimed by">host:<wbr>1234') == 2


# The paginator's count: a <p> up to Django 5.2, a <nav> with a hidden heading in 6.
PAGINATOR = r'class="paginator"[^>]*>(?:(?!</(?:p|nav)>).)*?\s{count}\s'


def test_an_unfiltered_list_counts_in_its_own_words(admin_client):
    for _ in range(4):
        make_job()
    make_failed()
    html = admin_client.get(JOBS).content.decode()
    assert re.search(PAGINATOR.format(count="4 jobs"), html, re.S)
    assert " results (" not in html and "Show all" not in html
    html = admin_client.get(FAILED).content.decode()
    assert re.search(PAGINATOR.format(count="1 failed job"), html, re.S)
    assert " result (" not in html and "Show all" not in html
    # Filtered or searched, the admin says how many of the list are shown.
    for query in ({"queue": "default"}, {"q": "tests"}):
        assert "4 results (<a" in admin_client.get(JOBS, query).content.decode()


def test_every_date_in_one_format(admin_client):
    pushed = timezone.now().replace(microsecond=0) - timedelta(days=3, seconds=17)
    job = make_job("running", pushed_at=pushed, retry_until=pushed + timedelta(days=9))
    failed = make_failed(pushed_at=pushed)
    shown = date_format(timezone.localtime(pushed), "DATETIME_FORMAT")
    pages = [admin_client.get(url).content.decode() for url in (
        JOBS, FAILED, job_url("change", job.pk), failed_url("change", failed.pk))]
    assert f">{shown}</time>" in pages[2] and f">{shown}</time>" in pages[3]
    for html in pages:
        times = re.findall(r"<time [^>]*>([^<]*)</time>", html)
        assert times
        for text in times:
            moment = datetime.strptime(text.replace(".", ""), "%b %d, %Y, %I:%M %p") if (
                ":" in text) else datetime.strptime(text.replace(".", ""), "%b %d, %Y, %I %p")
            assert date_format(moment, "DATETIME_FORMAT") == text
        # A date outside <time> would be in another format; the ISO form is only in the
        # <time> tags' attributes (the exact moment, on hover).
        visible = re.sub(r"<time [^>]*>", "<time>", html)
        assert not re.search(r"\d{4}-\d\d-\d\d \d\d:\d\d", visible)


@pytest.mark.parametrize("state", ["waiting", "delayed", "running", "abandoned"])
def test_state_filter(admin_client, state):
    made = {s: make_job(s) for s in ("waiting", "delayed", "running", "abandoned")}
    response = admin_client.get(JOBS, {"state": state})
    assert ids(response) == {made[state].pk}


def test_state_follows_retry_after(admin_client, settings):
    job = make_job("running", claimed_at=timezone.now() - timedelta(seconds=30))
    assert ids(admin_client.get(JOBS, {"state": "running"})) == {job.pk}
    settings.LATERITE_QUEUE_RETRY_AFTER = 10
    assert ids(admin_client.get(JOBS, {"state": "abandoned"})) == {job.pk}


def test_unknown_state_is_an_invalid_filter(admin_client):
    make_job()
    response = admin_client.get(JOBS, {"state": "sleeping"})
    # The admin's answer to a bad lookup: back to the list with ?e=1.
    assert response.status_code == 302 and response["Location"].endswith("?e=1")


def test_queue_and_name_filters_and_search(admin_client):
    a = make_job(name="tests.record", queue="default", payload={"args": ["alpha"], "kwargs": {}})
    b = make_job(name="tests.mail", queue="mail", payload={"args": ["beta"], "kwargs": {}})
    assert ids(admin_client.get(JOBS, {"queue": "mail"})) == {b.pk}
    assert ids(admin_client.get(JOBS, {"name": "tests.record"})) == {a.pk}
    assert ids(admin_client.get(JOBS, {"q": "beta"})) == {b.pk}       # payload
    assert ids(admin_client.get(JOBS, {"q": "mail"})) == {b.pk}       # name
    assert ids(admin_client.get(JOBS, {"q": str(a.pk)})) >= {a.pk}    # id
    queues = admin_client.get(JOBS).content.decode()
    assert "?queue=mail" in queues and "?queue=default" in queues


def test_the_name_filter_offers_registered_names_on_jobs_and_stored_names_on_failed(
        admin_client):
    from laterite_django.registry import registry

    make_job(name="tests.gone_from_the_code")
    make_failed(name="tests.failed_gone")
    jobs_page = admin_client.get(JOBS).content.decode()
    for name in registry.names():
        assert f"?name={name}" in jobs_page
    assert "?name=tests.gone_from_the_code" not in jobs_page
    # Still filtered by when asked for, and offered as the choice made.
    chosen = admin_client.get(JOBS, {"name": "tests.gone_from_the_code"})
    assert len(ids(chosen)) == 1
    assert "?name=tests.gone_from_the_code" in chosen.content.decode()
    assert "?name=tests.failed_gone" in admin_client.get(FAILED).content.decode()


def test_job_detail_is_read_only_with_formatted_payload(admin_client):
    job = make_job("delayed", payload={"args": [1, "<b>two</b>"], "kwargs": {"user_id": 7}},
                   last_error="RuntimeError: flaky attempt 1")
    response = admin_client.get(job_url("change", job.pk))
    assert response.status_code == 200
    html = response.content.decode()
    pretty = json.dumps({"args": [1, "<b>two</b>"], "kwargs": {"user_id": 7}}, indent=2)
    escaped = pretty.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace(
        '"', "&quot;")
    assert f'<pre class="laterite-pre">{escaped}</pre>' in html
    assert "<b>two</b>" not in html
    assert "RuntimeError: flaky attempt 1" in html
    assert 'name="_save"' not in html and 'value="Run now"' in html
    # No edit through a forged POST, no add form.
    assert admin_client.post(job_url("change", job.pk), {"queue": "x"}).status_code == 403
    assert admin_client.get(reverse("admin:laterite_django_job_add")).status_code == 403


def test_payload_that_is_not_json_is_shown_as_stored(admin_client):
    job = make_job()
    Job.objects.filter(pk=job.pk).update(payload="{not json")
    html = admin_client.get(job_url("change", job.pk)).content.decode()
    assert "The payload is not valid JSON" in html and "{not json" in html


def test_run_now_action(admin_client):
    delayed, running = make_job("delayed"), make_job("running")
    before = Job.objects.get(pk=running.pk).available_at
    response = admin_client.post(
        JOBS, {"action": "run_now", "_selected_action": [delayed.pk, running.pk]}, follow=True)
    assert texts(response) == [
        "1 job due now.", "1 job was left as it is: it is running or no longer queued."]
    assert Job.objects.get(pk=delayed.pk).available_at <= timezone.now()
    assert Job.objects.get(pk=running.pk).available_at == before


def test_run_now_button(admin_client):
    job = make_job("delayed")
    response = admin_client.post(job_url("run_now", job.pk), follow=True)
    assert texts(response) == [f"Job #{job.pk} is due now."]
    assert ids(admin_client.get(JOBS, {"state": "waiting"})) == {job.pk}
    running = make_job("running")
    assert 'value="Run now"' not in admin_client.get(job_url("change", running.pk)).content.decode()
    response = admin_client.post(job_url("run_now", running.pk), follow=True)
    assert texts(response) == [f"Job #{running.pk} is running; it was left as it is."]
    assert admin_client.get(job_url("run_now", job.pk)).status_code == 405
    assert admin_client.post(job_url("run_now", 999_999)).status_code == 404


def test_run_now_goes_through_the_store_and_wakes_a_worker(
    admin_client, store, store_kind, workers
):
    later = jobs.record.push_in(timedelta(hours=1), "later").id
    jobs.mail.push("busy")
    running = store.claim(["mail"], "elsewhere")[0].id
    # A worker that sleeps for an hour unless something wakes it, seen asleep.
    waiting = idle_worker_seen(store_kind, store)
    worker = workers.start("--queue", "default", "--sleep", "3600", "--max-jobs", "1")
    wait_for(waiting)
    response = admin_client.post(
        JOBS, {"action": "run_now", "_selected_action": [later, running]}, follow=True)
    assert texts(response) == [
        "1 job due now.", "1 job was left as it is: it is running or no longer queued."]
    assert store.counts()["mail"].running == 1
    _, err = worker.communicate(timeout=60)
    assert worker.returncode == 0, err
    assert list(Record.objects.values_list("value", flat=True)) == ["later"]


@pytest.mark.parametrize(("url", "action"), [(JOBS, "run_now"), (FAILED, "retry_selected")])
def test_an_action_refuses_an_id_that_is_not_a_number(admin_client, url, action):
    job, failed = make_job("delayed"), make_failed()
    pk = job.pk if url == JOBS else failed.pk
    response = admin_client.post(
        url, {"action": action, "_selected_action": [pk, "7; DROP"]}, follow=True)
    assert texts(response) == ["Nothing changed: '7; DROP' is not a job id."]
    assert Job.objects.get(pk=job.pk).available_at > timezone.now()
    assert FailedJob.objects.filter(pk=failed.pk).exists()


def idle_worker_seen(store_kind: str, store) -> Callable[[], bool]:
    """Return a check that a worker started from now on waits to be woken.

    PostgreSQL: a session that was not there before holds the idle workers' lock
    (IDLE_LOCK, shared), which a worker takes once it LISTENs and before its last
    claim ahead of the wait, so a notification sent from then on reaches it.
    Redis: a connection opened from now on blocks; the wake-up tokens left by the
    pushes are dropped first, so the worker blocks at once.
    SQLite: nothing shows it, and nothing is lost meanwhile (a waiting worker sees
    every commit made since its last claim); a second lets it start and go idle.
    """
    if store_kind == "database" and connection.vendor == "sqlite":
        started = time.monotonic()
        return lambda: time.monotonic() - started > 1
    if store_kind == "database":
        def listeners() -> set[int]:
            with connection.cursor() as cursor:
                # A bigint advisory lock shows as its high and low 32 bits.
                cursor.execute(
                    "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted "
                    "AND mode = 'ShareLock' AND database = (SELECT oid FROM pg_database "
                    "WHERE datname = current_database()) AND classid::bigint = %s "
                    "AND objid::bigint = %s AND objsubid = 1",
                    [IDLE_LOCK >> 32, IDLE_LOCK & 0xFFFFFFFF])
                return {pid for (pid,) in cursor.fetchall()}

        before = listeners()
        return lambda: bool(listeners() - before)
    client = store.client  # the store's server (on a cluster, its slot's primary)
    client.delete(store.key("queue", "default", "wake"))
    before = max(int(c["id"]) for c in client.client_list())
    return lambda: any(
        int(c["id"]) > before and "b" in c["flags"] for c in client.client_list())


def test_delete_action_asks_then_deletes(admin_client):
    keep, gone = make_job(), make_job("delayed")
    data = {"action": "delete_jobs_selected", "_selected_action": [gone.pk]}
    assert b"Delete 1 job?" in admin_client.post(JOBS, data).content
    response = admin_client.post(JOBS, {**data, "post": "yes"}, follow=True)
    assert texts(response) == ["1 job deleted."]
    assert list(Job.objects.values_list("pk", flat=True)) == [keep.pk]


# -- the failed list --------------------------------------------------------------


def test_failed_list_columns_filters_and_search(admin_client):
    old = make_failed(queue="mail", name="tests.mail", error="Fail: no such user\n",
                      failed_at=timezone.now() - timedelta(days=30))
    new = make_failed(error="ValueError: broken 7\nTraceback (most recent call last):\n  x")
    response = admin_client.get(FAILED)
    html = response.content.decode()
    assert ids(response) == {old.pk, new.pk}
    assert "Fail: no such user" in html and "ValueError: broken 7" in html
    assert "Traceback" not in html  # only the error's first line in the list
    assert ids(admin_client.get(FAILED, {"queue": "mail"})) == {old.pk}
    assert ids(admin_client.get(FAILED, {"name": "tests.always_broken"})) == {new.pk}
    assert ids(admin_client.get(FAILED, {"q": "no such user"})) == {old.pk}
    assert ids(admin_client.get(FAILED, {"q": "tests.mail"})) == {old.pk}
    week_ago = (timezone.now() - timedelta(days=7)).isoformat()
    assert ids(admin_client.get(FAILED, {"failed_at__gte": week_ago})) == {new.pk}


def test_failed_detail_shows_traceback_payload_and_retry(admin_client):
    error = 'ValueError: broken <x>\nTraceback (most recent call last):\n  File "a.py", line 1'
    failed = make_failed(error=error, payload={"args": [], "kwargs": {"user_id": 7}})
    response = admin_client.get(failed_url("change", failed.pk))
    html = response.content.decode()
    assert "<pre>ValueError: broken &lt;x&gt;\nTraceback (most recent call last):\n" in html
    assert "&quot;user_id&quot;: 7" in html
    assert f'formaction="{failed_url("retry", failed.pk)}"' in html
    assert 'name="_save"' not in html and ">Forget</a>" in html
    # Retry (and Forget) above the traceback, and again below it.
    traceback_at = html.index('class="form-row field-traceback')
    retry = [m.start() for m in re.finditer(r'value="Retry"', html)]
    forget = [m.start() for m in re.finditer(r">Forget</a>", html)]
    assert len(retry) == len(forget) == 2
    assert retry[0] < traceback_at < retry[1] and forget[0] < traceback_at < forget[1]


def test_run_now_above_and_below_a_jobs_fields(admin_client):
    html = admin_client.get(job_url("change", make_job("delayed").pk)).content.decode()
    payload_at = html.index('class="form-row field-payload_json')
    run_now = [m.start() for m in re.finditer(r'value="Run now"', html)]
    assert len(run_now) == 2 and run_now[0] < payload_at < run_now[1]


@pytest.mark.parametrize("store_kind", ["database"], indirect=True)
def test_a_traceback_starts_at_the_jobs_own_frame(admin_client, workers):
    jobs.always_broken.push("sync")
    jobs.async_broken.push("async")
    result = workers.run("--stop-when-empty")
    assert result.returncode == 0, result.stderr
    for name, summary in [("tests.always_broken", "ValueError: broken sync"),
                          ("tests.async_broken", "ValueError: async broken async")]:
        failed = FailedJob.objects.get(name=name)
        _, _, frames = failed.error.partition("Traceback (most recent call last):\n")
        first_file = frames.splitlines()[0]
        assert first_file.startswith('  File "') and "tests/testapp/jobs.py" in first_file, (
            failed.error)
        assert "laterite_django" not in failed.error and "asyncio" not in failed.error
        assert failed.error_summary == summary and failed.error.endswith(f"{summary}\n")
        html = admin_client.get(failed_url("change", failed.pk)).content.decode()
        # The worker's frames (files under laterite_django/worker/), not the sidebar's
        # link to the Workers page (/admin/laterite_django/workerrecord/).
        assert "laterite_django/worker/" not in html


def test_an_error_inside_the_worker_keeps_every_frame():
    from laterite_django.worker import attempt

    # An error raised and caught in the worker's own code (compiled as if in attempt.py).
    source = ("def fail():\n    try:\n        raise RuntimeError('in the worker')\n"
              "    except RuntimeError as e:\n        return e\n")
    namespace: dict = {}
    exec(compile(source, attempt.__file__, "exec"), namespace)
    text = attempt.describe(namespace["fail"]())
    assert text.startswith("RuntimeError: in the worker\n\nTraceback (most recent call last):")
    assert f'File "{attempt.__file__}", line 3, in fail' in text


def test_retry_action_puts_jobs_back(admin_client, store):
    failed = [make_failed(queue="mail"), make_failed(), make_failed()]
    other = make_failed()
    response = admin_client.post(
        FAILED, {"action": "retry_selected", "_selected_action": [f.pk for f in failed]},
        follow=True)
    assert texts(response) == ["3 jobs put back on their queues."]
    assert list(FailedJob.objects.values_list("pk", flat=True)) == [other.pk]
    counts = store.counts()
    assert (counts["mail"].waiting, counts["default"].waiting, counts["default"].failed) == (
        1, 2, 1)


def test_retry_select_across_a_filter(admin_client, store):
    page = [make_failed(queue="mail") for _ in range(3)]
    keep = make_failed(queue="default")
    # As the admin's page sends it: the page's rows ticked, then "select all"; the
    # count is confirmed first.
    data = {"action": "retry_selected", "select_across": "1", "index": "0",
            "_selected_action": [page[0].pk]}
    assert "Retry 3 failed jobs?" in admin_client.post(
        FAILED + "?queue=mail", data).content.decode()
    assert FailedJob.objects.count() == 4
    response = admin_client.post(FAILED + "?queue=mail", {**data, "post": "yes"}, follow=True)
    assert "3 jobs put back on their queues." in texts(response)
    assert list(FailedJob.objects.values_list("pk", flat=True)) == [keep.pk]
    assert store.counts()["mail"].waiting == 3


def test_retry_button_shows_the_job_waiting_on_its_queue(admin_client, store):
    failed = make_failed(queue="mail", name="tests.mail", payload={"args": ["m"], "kwargs": {}})
    response = admin_client.post(failed_url("retry", failed.pk))
    assert response.status_code == 302
    assert response["Location"] == f"{JOBS}?queue=mail"
    page = admin_client.get(response["Location"])
    assert texts(page) == ["1 job put back on its queue."]
    rows = {row.queue: row for row in page.context["queue_summary"].rows}
    assert (rows["mail"].waiting, rows["mail"].failed) == (1, 0)
    assert not FailedJob.objects.exists()
    # Retrying it again (a second click, another admin) does nothing, clearly.
    assert admin_client.post(failed_url("retry", failed.pk)).status_code == 404


@pytest.mark.parametrize("queue", ["a&b c", "what?state=running", "x#1"])
def test_retry_button_redirects_to_a_queue_of_any_name(admin_client, store, store_kind, queue):
    failed = make_failed(queue=queue)
    response = admin_client.post(failed_url("retry", failed.pk))
    assert response["Location"] == f"{JOBS}?{urlencode({'queue': queue})}"
    page = admin_client.get(response["Location"])
    assert page.status_code == 200
    assert {row.queue for row in page.context["queue_summary"].rows} == {queue}
    if store_kind == "database":  # the Redis store's jobs are not in the list
        assert [job.queue for job in page.context["cl"].result_list] == [queue]


def test_a_retried_job_remembers_the_failure_it_came_from(admin_client, store, store_kind,
                                                         workers):
    jobs.always_broken.push("z")
    assert workers.run("--stop-when-empty").returncode == 0
    first = FailedJob.objects.get()
    assert (first.retried_from_id, first.retried_from_error) == (None, "")
    assert "Retried from" not in admin_client.get(failed_url("change", first.pk)).content.decode()
    assert admin_client.post(failed_url("retry", first.pk)).status_code == 302
    origin = f"Retried from failed job #{first.pk}: ValueError: broken z"
    if store_kind == "database":  # the Redis store's jobs are not in the Job table
        job = Job.objects.get()
        assert (job.retried_from_id, job.retried_from_error) == (first.pk, "ValueError: broken z")
        html = admin_client.get(job_url("change", job.pk)).content.decode()
        assert f'<p class="laterite-retried-from">{origin}</p>' in html

    # It fails again: its failed row names the one it was retried from, which is gone.
    assert workers.run("--stop-when-empty").returncode == 0
    again = FailedJob.objects.get()
    assert again.pk != first.pk
    assert (again.retried_from_id, again.retried_from_error) == (first.pk, "ValueError: broken z")
    html = admin_client.get(failed_url("change", again.pk)).content.decode()
    assert f'<p class="laterite-retried-from">{origin}</p>' in html

    # Retried by the store (as queue_retry does), the next failure names the row before.
    assert store.retry([again.pk]) == 1
    assert workers.run("--stop-when-empty").returncode == 0
    third = FailedJob.objects.get()
    assert (third.retried_from_id, third.retried_from_error) == (again.pk, "ValueError: broken z")


def test_a_retry_dropped_as_a_duplicate_links_nothing(store, store_kind):
    failed = make_failed(name="tests.unique", unique_key="user:1",
                         payload={"args": [1], "kwargs": {}})
    waiting = jobs.unique.push(1).id
    assert store.retry([failed.pk]) == 1
    assert not FailedJob.objects.exists()
    assert store.counts()["default"].waiting == 1
    if store_kind == "database":
        assert list(Job.objects.values_list("pk", "retried_from_id")) == [(waiting, None)]
    else:
        fields = store.client.hgetall(store.key("job", str(waiting)))
        assert b"retried_from_id" not in fields and fields[b"unique_key"] == b"user:1"


@pytest.mark.parametrize("store_kind", ["database"], indirect=True)
def test_the_retried_from_note_is_escaped(admin_client, store):
    failed = make_failed(error="ValueError: <b>bold</b> & more\nTraceback ...")
    assert store.retry([failed.pk]) == 1
    html = admin_client.get(job_url("change", Job.objects.get().pk)).content.decode()
    assert (f"Retried from failed job #{failed.pk}: ValueError: &lt;b&gt;bold&lt;/b&gt; "
            f"&amp; more</p>") in html


def test_forget_action_asks_first(admin_client):
    gone = [make_failed(), make_failed()]
    keep = make_failed()
    data = {"action": "forget_selected", "_selected_action": [f.pk for f in gone]}
    confirm = admin_client.post(FAILED, data)
    assert confirm.status_code == 200 and b"Forget 2 failed jobs?" in confirm.content
    assert FailedJob.objects.count() == 3
    response = admin_client.post(FAILED, {**data, "post": "yes", "index": "0"}, follow=True)
    assert texts(response) == ["2 failed jobs forgotten."]
    assert list(FailedJob.objects.values_list("pk", flat=True)) == [keep.pk]


def test_forget_select_across_through_its_confirmation(admin_client):
    page = [make_failed(queue="mail") for _ in range(25)]
    keep = make_failed()
    across = {"action": "forget_selected", "select_across": "1", "index": "0",
              "_selected_action": [page[-1].pk]}
    confirm = admin_client.post(FAILED + "?queue=mail", across)
    html = confirm.content.decode()
    assert "Forget 25 failed jobs?" in html and "and 5 more" in html
    assert 'name="select_across" value="1"' in html
    response = admin_client.post(FAILED + "?queue=mail", {**across, "post": "yes"}, follow=True)
    assert texts(response) == ["25 failed jobs forgotten."]
    assert list(FailedJob.objects.values_list("pk", flat=True)) == [keep.pk]


def test_forget_from_the_detail_page(admin_client):
    failed = make_failed()
    response = admin_client.post(failed_url("delete", failed.pk), {"post": "yes"}, follow=True)
    assert response.status_code == 200
    assert not FailedJob.objects.exists()


# -- the summary --------------------------------------------------------------------


def test_summary_counts_every_queue_from_the_store(admin_client, store):
    jobs.record.push("a")
    jobs.record.push_in(timedelta(hours=1), "b")
    jobs.mail.push("c")
    make_failed(queue="mail")
    make_failed(queue="low")
    for url in (JOBS, FAILED):
        response = admin_client.get(url)
        rows = {r.queue: (r.waiting, r.delayed, r.running, r.failed)
                for r in response.context["queue_summary"].rows}
        assert rows == {"default": (1, 1, 0, 0), "mail": (1, 0, 0, 1), "low": (0, 0, 0, 1)}
        html = response.content.decode()
        assert f'href="{JOBS}?queue=default&amp;state=delayed">1</a>' in html
        assert f'href="{FAILED}?queue=low">1</a>' in html


def test_summary_counts_stop_at_the_cap_and_say_so(admin_client, store, store_kind,
                                                   monkeypatch):
    """Past the cap a count reads "2+", the totals too, and a note says why; Redis keeps
    its waiting jobs' number (exact, whatever the cap), the failed table is counted."""
    monkeypatch.setattr(admin_summary, "CAP", 2)
    counted = store_kind == "database"
    for _ in range(3):
        jobs.record.push("a")
        make_failed(queue="mail")
    jobs.mail.push("c")
    make_failed(queue="low")
    for url in (JOBS, FAILED):
        response = admin_client.get(url)
        rows = {r.queue: (r.waiting, r.delayed, r.running, r.failed, set(r.capped))
                for r in response.context["queue_summary"].rows}
        default = (2, 0, 0, 0, {"waiting"}) if counted else (3, 0, 0, 0, set())
        assert rows == {"default": default,
                        "mail": (1, 0, 0, 2, {"failed"}), "low": (0, 0, 0, 1, set())}
        html = response.content.decode()
        waiting = "2+" if counted else "3"
        assert f'href="{JOBS}?queue=default&amp;state=waiting">{waiting}</a>' in html
        assert f'href="{FAILED}?queue=mail">2+</a>' in html
        assert f'href="{FAILED}?queue=low">1</a>' in html
        assert "A count shown as 2+ stopped at 2: there are more." in html
        assert f'<td class="num">{"3+" if counted else "4"}</td>' in html  # all waiting
    monkeypatch.setattr(admin_summary, "CAP", 3)  # each count within it: exact, no note
    response = admin_client.get(JOBS)
    assert not any(r.capped for r in response.context["queue_summary"].rows)
    assert "stopped at" not in response.content.decode()


def test_summary_with_nothing_queued(admin_client):
    assert b"No jobs are waiting, running or failed." in admin_client.get(FAILED).content


# -- permissions ----------------------------------------------------------------------


def test_view_only_staff_sees_no_action_and_a_forged_post_gets_403(staff):
    client = staff("view_job", "view_failedjob")
    job, failed = make_job("delayed"), make_failed()
    assert action_names(client.get(JOBS)) == set()
    assert action_names(client.get(FAILED)) == set()
    assert 'value="Retry"' not in client.get(failed_url("change", failed.pk)).content.decode()
    assert 'value="Run now"' not in client.get(job_url("change", job.pk)).content.decode()
    assert ">Forget</a>" not in client.get(failed_url("change", failed.pk)).content.decode()
    forged = [
        (FAILED, {"action": "retry_selected", "_selected_action": [failed.pk], "index": "0"}),
        (FAILED, {"action": "forget_selected", "_selected_action": [failed.pk], "post": "yes"}),
        (FAILED, {"action": "delete_selected", "_selected_action": [failed.pk], "post": "yes"}),
        (JOBS, {"action": "run_now", "_selected_action": [job.pk], "index": "0"}),
        (JOBS, {"action": "delete_selected", "_selected_action": [job.pk], "post": "yes"}),
        (JOBS, {"action": "delete_jobs_selected", "_selected_action": [job.pk], "post": "yes"}),
        (failed_url("retry", failed.pk), {}),
        (failed_url("delete", failed.pk), {"post": "yes"}),
        (job_url("run_now", job.pk), {}),
        (job_url("delete", job.pk), {"post": "yes"}),
    ]
    for url, data in forged:
        assert client.post(url, data).status_code == 403, (url, data)
    assert FailedJob.objects.filter(pk=failed.pk).exists()
    assert Job.objects.get(pk=job.pk).available_at > timezone.now()


def test_retry_needs_change_and_forget_needs_delete(staff):
    client = staff("view_failedjob", "change_failedjob")
    failed = make_failed()
    assert action_names(client.get(FAILED)) == {"retry_selected", "release_sequences_selected"}
    forget = {"action": "forget_selected", "_selected_action": [failed.pk], "post": "yes"}
    assert client.post(FAILED, forget).status_code == 403
    retry = {"action": "retry_selected", "_selected_action": [failed.pk], "index": "0"}
    assert texts(client.post(FAILED, retry, follow=True)) == ["1 job put back on its queue."]

    client.logout()
    client = staff_with(client, "view_failedjob", "delete_failedjob")
    failed = make_failed()
    assert action_names(client.get(FAILED)) == {"forget_selected"}
    html = client.get(failed_url("change", failed.pk)).content.decode()
    assert 'value="Retry"' not in html and ">Forget</a>" in html
    assert client.post(failed_url("retry", failed.pk)).status_code == 403
    response = client.post(FAILED, {**forget, "_selected_action": [failed.pk]}, follow=True)
    assert texts(response) == ["1 failed job forgotten."]


def test_run_now_needs_change_on_job(staff):
    client = staff("view_job", "change_job", "view_failedjob", "change_failedjob")
    job = make_job("delayed")
    assert action_names(client.get(JOBS)) == {"run_now", "cancel_selected"}
    assert client.post(job_url("run_now", job.pk)).status_code == 302
    assert Job.objects.get(pk=job.pk).available_at <= timezone.now()


def staff_with(client, *codenames: str):
    """Log the client in as a second staff user holding exactly `codenames`."""
    from django.contrib.auth import get_user_model

    user = get_user_model().objects.create_user("staff2", is_staff=True)
    user.user_permissions.set(Permission.objects.filter(
        content_type__app_label="laterite_django", codename__in=codenames))
    client.force_login(user)
    return client


# -- the Redis store -----------------------------------------------------------------


@pytest.fixture
def redis_down(settings):
    """The Redis store, pointed at a port where no Redis listens."""
    from laterite_django.stores import reset_store

    settings.CACHES = {**settings.CACHES, "down": {
        "BACKEND": "django_redis.cache.RedisCache",
        "LOCATION": "redis://127.0.0.1:1/0",
        "OPTIONS": {"CLIENT_CLASS": "django_redis.client.DefaultClient",
                    "SOCKET_CONNECT_TIMEOUT": 1, "SOCKET_TIMEOUT": 1},
    }}
    settings.LATERITE_QUEUE_STORE = "redis"
    settings.LATERITE_QUEUE_REDIS = "down"
    reset_store()
    yield
    reset_store()


def test_failed_list_stays_usable_when_the_store_is_down(admin_client, redis_down, caplog):
    failed = make_failed()
    response = admin_client.get(FAILED)
    assert response.status_code == 200
    assert "The queue counts cannot be read:" in response.content.decode()
    assert ids(response) == {failed.pk}
    assert admin_client.get(failed_url("change", failed.pk)).status_code == 200
    assert "could not read the queue counts" in caplog.text
