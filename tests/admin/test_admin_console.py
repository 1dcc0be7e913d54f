"""The lists as a console: filters by argument, error class and time range on the jobs,
failed jobs and history lists (bounded windows, their notice), and the bulk actions on
everything a filter keeps, confirmed with the count and applied in chunks. Every store:
the failed list and the history live in the database for each."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from laterite_django.admin import actions as admin_actions
from laterite_django.admin.console import ConsoleFilter
from laterite_django.admin.lists import FailedJobAdmin
from laterite_django.models import FailedJob, Job, JobRecord
from laterite_django.testing import run_jobs
from tests.admin.test_admin import FAILED, JOBS, make_failed, make_job, texts
from tests.testapp import jobs

HISTORY = reverse("admin:laterite_django_jobrecord_changelist")


@pytest.fixture(autouse=True)
def fast_passwords(settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


def listed(client, url: str, **query) -> list[int]:
    response = client.get(url, query)
    assert response.status_code == 200
    return [obj.pk for obj in response.context["cl"].result_list]


def notice(response) -> str:
    return "".join(spec.notice for spec in response.context["cl"].filter_specs
                   if isinstance(spec, ConsoleFilter))


def failed_through_the_store() -> dict[str, FailedJob]:
    """Failed jobs made by running jobs that fail, as a worker settles them."""
    jobs.always_broken.push(value="order-8812")
    jobs.always_broken.push(value="order-8813")
    jobs.fail_now.push("nothing")
    run_jobs(wait_delayed=5)
    return {row.payload: row for row in FailedJob.objects.all()}


# -- filters ------------------------------------------------------------------------


def test_failed_list_filters_by_argument_error_class_and_time(admin_client, store):
    rows = failed_through_the_store()
    by_value = {json.loads(p)["kwargs"].get("value") or json.loads(p)["args"][0]: r.pk
                for p, r in rows.items()}
    assert len(by_value) == 3
    assert listed(admin_client, FAILED, arg="value=order-8812") == [by_value["order-8812"]]
    assert listed(admin_client, FAILED, arg="0=nothing") == [by_value["nothing"]]
    assert listed(admin_client, FAILED, arg="value=order-1") == []
    assert sorted(listed(admin_client, FAILED, error="ValueError")) == sorted(
        [by_value["order-8812"], by_value["order-8813"]])
    assert listed(admin_client, FAILED, error="Fail") == [by_value["nothing"]]
    assert listed(admin_client, FAILED, error="Error") == []  # a class, not a piece of one
    # Filters combine with the others.
    assert listed(admin_client, FAILED, error="ValueError", arg="value=order-8813",
                  name="tests.always_broken") == [by_value["order-8813"]]
    now = timezone.now()
    assert len(listed(admin_client, FAILED, since=(now - timedelta(hours=1)).isoformat())) == 3
    assert listed(admin_client, FAILED, until=(now - timedelta(hours=1)).isoformat()) == []
    assert len(listed(admin_client, FAILED, since=now.date().isoformat())) == 3


def test_bad_filter_values_are_named_and_list_nothing(admin_client, store):
    make_failed()
    for query, said in ((("arg", "order_id"), "'order_id' is not KEY=VALUE"),
                        (("error", "Value Error"), "'Value Error' is not a class name"),
                        (("since", "yesterday"), "'yesterday' is not an ISO 8601 date")):
        response = admin_client.get(FAILED, dict([query]))
        assert response.status_code == 200
        assert list(response.context["cl"].result_list) == []
        assert any(said in text for text in texts(response)), texts(response)


def test_job_list_filters_by_argument_and_pushed_time(admin_client, store):
    now = timezone.now()
    old = make_job(payload={"args": [], "kwargs": {"order_id": 8812}},
                   pushed_at=now - timedelta(days=2))
    new = make_job(payload={"args": [], "kwargs": {"order_id": 8812}})
    other = make_job(payload={"args": ["8812"], "kwargs": {"order_id": "8812"}})
    assert listed(admin_client, JOBS, arg="order_id=8812") == [new.pk, old.pk]
    assert listed(admin_client, JOBS, arg='order_id="8812"') == [other.pk]
    assert listed(admin_client, JOBS, arg="0=8812") == []  # the number is not the text
    assert listed(admin_client, JOBS, arg='0="8812"') == [other.pk]
    assert listed(admin_client, JOBS, arg="order_id=8812",
                  since=(now - timedelta(days=1)).isoformat()) == [new.pk]
    # A payload the database cannot read as JSON is left out, not an error.
    Job.objects.filter(pk=other.pk).update(payload='{"args": [1], "kwargs": \\u0000 oops')
    assert listed(admin_client, JOBS, arg="order_id=8812") == [new.pk, old.pk]
    page = admin_client.get(JOBS).content.decode()
    assert "cannot be matched by value" in page  # the encrypted arguments' caveat


def test_a_full_window_says_so(admin_client, store, monkeypatch):
    monkeypatch.setattr(ConsoleFilter, "scan", 3)
    made = [make_failed(payload={"args": [], "kwargs": {"n": i}}) for i in range(5)]
    response = admin_client.get(FAILED, {"arg": "n=0"})
    assert [o.pk for o in response.context["cl"].result_list] == []  # older than the window
    assert "looked through the 3 newest rows only" in notice(response)
    assert "looked through" in response.content.decode()
    response = admin_client.get(FAILED, {"arg": "n=4"})
    assert [o.pk for o in response.context["cl"].result_list] == [made[4].pk]
    # The window holds the rows the indexed filters keep: narrowed, it reaches further.
    FailedJob.objects.filter(pk__in=[m.pk for m in made[1:]]).update(queue="mail")
    response = admin_client.get(FAILED, {"arg": "n=0", "queue": "default"})
    assert [o.pk for o in response.context["cl"].result_list] == [made[0].pk]
    assert notice(response) == ""
    assert notice(admin_client.get(FAILED)) == ""  # no test of each row: no window


def test_a_window_that_holds_every_row_is_not_full(admin_client, store, monkeypatch):
    monkeypatch.setattr(ConsoleFilter, "scan", 3)
    made = [make_failed(payload={"args": [], "kwargs": {"n": i}}) for i in range(3)]
    response = admin_client.get(FAILED, {"arg": "n=0"})
    assert [o.pk for o in response.context["cl"].result_list] == [made[0].pk]
    assert notice(response) == ""  # exactly 3 rows: none was left out
    make_failed(payload={"args": [], "kwargs": {"n": 3}})
    assert "looked through the 3 newest rows only" in notice(
        admin_client.get(FAILED, {"arg": "n=0"}))


def test_a_windowed_filter_reads_its_page_and_count_in_one_query(admin_client, store,
                                                                 monkeypatch):
    """The count of the rows a test of each row keeps comes with the page's rows (one
    read of the window, no COUNT query), on every page and past the last one."""
    monkeypatch.setattr(ConsoleFilter, "scan", 50)
    monkeypatch.setattr(FailedJobAdmin, "list_per_page", 4)
    made = [make_failed(payload={"args": [], "kwargs": {"n": i % 2}}) for i in range(11)]
    odd = [m.pk for m in reversed(made) if m.pk % 2 == made[1].pk % 2]
    with CaptureQueriesContext(connection) as captured:
        response = admin_client.get(FAILED, {"arg": "n=1"})
    assert [o.pk for o in response.context["cl"].result_list] == odd[:4]
    assert response.context["cl"].result_count == len(odd) == 5
    assert [q["sql"] for q in captured if "COUNT(*) AS" in q["sql"]] == []
    assert sum("OVER ()" in q["sql"] for q in captured) == 1
    assert "5 failed jobs" in response.content.decode()
    response = admin_client.get(FAILED, {"arg": "n=1", "p": "2"})
    assert [o.pk for o in response.context["cl"].result_list] == odd[4:]
    assert response.context["cl"].result_count == 5
    # Past the last page: counted, and refused as Django refuses it.
    assert admin_client.get(FAILED, {"arg": "n=1", "p": "3"}).status_code == 302
    # Nothing kept: no row carries the count, which is 0.
    response = admin_client.get(FAILED, {"arg": "n=7"})
    assert (response.context["cl"].result_count, list(response.context["cl"].result_list)
            ) == (0, [])


def test_history_filters_by_argument_and_error_class(admin_client, store, settings):
    settings.LATERITE_QUEUE_HISTORY = {"keep": "7d"}
    jobs.add.push(a=1, b=8812)
    jobs.add.push(a=2, b=3)
    jobs.always_broken.push(value="order-8812")
    run_jobs(wait_delayed=5)
    records = {(r.name, json.dumps(r.kwargs, sort_keys=True)): r.pk
               for r in JobRecord.objects.all()}
    assert len(records) == 3
    assert listed(admin_client, HISTORY, arg="b=8812") == [
        records[("tests.add", '{"a": 1, "b": 8812}')]]
    assert listed(admin_client, HISTORY, error="ValueError") == [
        records[("tests.always_broken", '{"value": "order-8812"}')]]
    assert listed(admin_client, HISTORY, error="builtins.ValueError") == []  # as written
    assert len(listed(admin_client, HISTORY, since=timezone.now().date().isoformat())) == 3


# -- bulk actions on a whole filter ---------------------------------------------------


def across(action: str, confirmed: bool, some_id: int) -> dict:
    data = {"action": action, "select_across": "1", "index": "0",
            ACTION_CHECKBOX_NAME: [str(some_id)]}
    if confirmed:
        data["post"] = "yes"
    return data


def test_retry_everything_a_filter_keeps_in_chunks(admin_client, store, monkeypatch):
    monkeypatch.setattr(admin_actions, "CHUNK", 2)  # 5 rows: three store calls
    calls: list[int] = []
    retry = type(store).retry

    def counted(self, ids):
        calls.append(len(ids))
        return retry(self, ids)

    monkeypatch.setattr(type(store), "retry", counted)
    kept = [make_failed(name="tests.record", payload={"args": ["x"], "kwargs": {"k": 1}})
            for _ in range(5)]
    left = make_failed(name="tests.record", payload={"args": ["x"], "kwargs": {"k": 2}})
    url = f"{FAILED}?arg=k%3D1"
    response = admin_client.post(url, across("retry_selected", False, kept[0].pk))
    assert response.status_code == 200
    assert "Retry 5 failed jobs?" in response.content.decode()
    assert FailedJob.objects.count() == 6 and calls == []  # nothing yet
    response = admin_client.post(url, across("retry_selected", True, kept[0].pk), follow=True)
    assert texts(response) == ["5 jobs put back on their queues."]
    assert calls == [2, 2, 1]
    assert list(FailedJob.objects.values_list("pk", flat=True)) == [left.pk]


def test_forget_everything_a_filter_keeps(admin_client, store):
    kept = [make_failed(error="smtplib.SMTPException: 421 busy\n...") for _ in range(3)]
    left = make_failed()
    url = f"{FAILED}?error=SMTPException"
    page = admin_client.post(url, across("forget_selected", False, kept[0].pk)).content.decode()
    assert "Forget 3 failed jobs?" in page
    response = admin_client.post(url, across("forget_selected", True, kept[0].pk), follow=True)
    assert texts(response) == ["3 failed jobs forgotten."]
    assert list(FailedJob.objects.values_list("pk", flat=True)) == [left.pk]


def test_cancel_and_delete_everything_a_filter_keeps(admin_client, store, monkeypatch):
    monkeypatch.setattr(admin_actions, "CHUNK", 2)
    cancelled = [make_job(payload={"args": [], "kwargs": {"tenant": "a"}}) for _ in range(3)]
    deleted = [make_job(payload={"args": [], "kwargs": {"tenant": "b"}}) for _ in range(3)]
    left = make_job(payload={"args": [], "kwargs": {"tenant": "c"}})
    page = admin_client.post(f"{JOBS}?arg=tenant%3Da",
                             across("cancel_selected", False, cancelled[0].pk))
    assert "Cancel 3 jobs?" in page.content.decode()
    admin_client.post(f"{JOBS}?arg=tenant%3Da", across("cancel_selected", True, cancelled[0].pk))
    page = admin_client.post(f"{JOBS}?arg=tenant%3Db",
                             across("delete_jobs_selected", False, deleted[0].pk))
    assert "Delete 3 jobs?" in page.content.decode()
    response = admin_client.post(f"{JOBS}?arg=tenant%3Db",
                                 across("delete_jobs_selected", True, deleted[0].pk), follow=True)
    assert "3 jobs deleted." in texts(response)
    if store.__class__.__name__ == "RedisStore":
        # The job table holds what the database store left; the Redis store's cancel
        # knows only its own jobs: nothing of the table is cancelled.
        assert set(Job.objects.values_list("pk", flat=True)) == {
            *(j.pk for j in cancelled), left.pk}
        return
    assert set(Job.objects.values_list("pk", flat=True)) == {left.pk}
    assert FailedJob.objects.filter(job_id__in=[j.pk for j in cancelled]).count() == 3
