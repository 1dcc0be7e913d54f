"""The admin's Batches list on every store: state, progress bar and counts, the state
filter, the read-only page with its callbacks and links to the batch's jobs, and
*Cancel selected batches* (confirmed first; 403 without the permission)."""

from __future__ import annotations

import html as html_module
import json

import pytest
from django.urls import reverse

from laterite_django import batch
from laterite_django.models import Batch, FailedJob, Job
from laterite_django.testing import run_jobs
from tests.admin.test_admin import FAILED, JOBS, action_names, make_failed, make_job, texts
from tests.admin.test_admin import staff as staff  # the fixture
from tests.testapp.jobs import member, record, step
from tests.testapp.models import Record

pytestmark = pytest.mark.django_db(transaction=True)

BATCHES = reverse("admin:laterite_django_batch_changelist")


def batch_url(pk: int) -> str:
    return reverse("admin:laterite_django_batch_change", args=[pk])


def listed(response) -> list[int]:
    return [obj.pk for obj in response.context["cl"].result_list]


def some_batches() -> tuple[Batch, Batch, Batch]:
    """One finished, one failed (a member gated), one running (pushed, not run)."""
    Record.objects.create(kind="gate", value="12")
    done = batch([member.call(i) for i in range(2)], name="all-good").push()
    failed = batch([member.call(i) for i in range(10, 14)], name="one-gated",
                   then=record.call("then"), catch=record.call("catch")).push()
    run_jobs()
    running = batch([step.call(f"s{i}") for i in range(3)], name="album-7",
                    then=record.call("then"), catch=record.call("catch"),
                    finally_=record.call("finally")).push()
    return done, failed, running


def cancel_post(*pks: int, confirmed: bool = True) -> dict:
    data = {"action": "cancel_batches", "_selected_action": list(pks), "index": "0"}
    return {**data, "post": "yes"} if confirmed else data


def test_the_list_shows_state_progress_and_counts_newest_first(admin_client, store):
    done, failed, running = some_batches()
    response = admin_client.get(BATCHES)
    assert response.status_code == 200
    assert listed(response) == [running.pk, failed.pk, done.pk]
    page = response.content.decode()
    assert "<title>Batches" in page
    assert 'id="laterite-summary"' not in page  # the queues' summary is the job lists'
    for state in ("running", "failed", "finished"):
        assert f'<span class="laterite-state laterite-batch-{state}"' in page
    # The Jobs list's progress bar, under the state: how many of its jobs ended.
    assert ('<span class="laterite-progress" title="4 of 4 ended"><progress max="1" '
            'value="1.000"></progress> 4 of 4 ended</span>') in page
    assert '<progress max="1" value="0.000"></progress> 0 of 3 ended' in page
    row = page.split(f'href="{batch_url(failed.pk)}"', 1)[1].split("</tr>", 1)[0]
    assert ('<td class="field-total">4</td><td class="field-succeeded">3</td>'
            '<td class="field-failed_count"><span class="laterite-failed">1</span></td>'
            '<td class="field-pending">0</td>') in row
    assert "3 batches" in page  # counted in words, as the job lists are


@pytest.mark.parametrize("state", ["running", "finished", "failed", "cancelled"])
def test_the_state_filter(admin_client, store, state):
    done, failed, running = some_batches()
    cancelled = batch([step.call("c")]).push()
    admin_client.post(BATCHES, cancel_post(cancelled.pk))
    expected = {"running": running, "finished": done, "failed": failed,
                "cancelled": cancelled}[state]
    assert listed(admin_client.get(f"{BATCHES}?state={state}")) == [expected.pk]


def test_an_unknown_state_or_batch_is_an_invalid_filter(admin_client, store):
    some_batches()
    for url in (f"{BATCHES}?state=done", f"{JOBS}?batch=abc", f"{FAILED}?batch=1%20OR%201",
                f"{JOBS}?batch=", f"{FAILED}?batch=-1"):
        response = admin_client.get(url)
        assert response.status_code == 302 and response["Location"].endswith("?e=1"), url


def test_the_page_shows_the_callbacks_and_links_to_the_jobs(admin_client, store, store_kind):
    done, failed, running = some_batches()
    page = html_module.unescape(admin_client.get(batch_url(running.pk)).content.decode())
    assert "album-7" in page and "0 of 3 ended" in page
    assert '<code>tests.record("then")</code>' in page
    assert '<code>tests.record("catch")</code>' in page
    assert '<code>tests.record("finally")</code>' in page
    assert 'name="_save"' not in page and "deletelink" not in page  # read-only
    # Its jobs not ended (none failed yet: no link to the failed list).
    assert f'href="{FAILED}?batch=' not in page
    if store_kind == "database":
        assert f'<a href="{JOBS}?batch={running.pk}" class="laterite-batch-link">' \
               f"Its jobs not ended (3)</a>" in page
    else:
        assert f'href="{JOBS}?batch=' not in page
        assert "Its jobs not ended (3) wait in Redis: the Jobs list does not hold them." in page
    page = html_module.unescape(admin_client.get(batch_url(failed.pk)).content.decode())
    assert "Every job ended, some failed for good." in page
    assert f'<a href="{FAILED}?batch={failed.pk}" class="laterite-batch-link">' \
           f"Its failed jobs (1)</a>" in page
    assert f'href="{JOBS}?batch=' not in page and "wait in Redis" not in page
    page = admin_client.get(batch_url(done.pk)).content.decode()
    assert "None of its jobs waits, runs or failed." in page


def lookalike(row: Job | FailedJob, batch_id: int) -> None:
    """Give `row` an argument that holds the batch mark's very words."""
    text = json.dumps({"args": [{"batch": [batch_id, 0]}], "kwargs": {}}, separators=(",", ":"))
    type(row).objects.filter(pk=row.pk).update(payload=text)


def test_the_links_list_the_batchs_jobs_only(admin_client, store, store_kind):
    _, failed, running = some_batches()
    other = batch([step.call("other")]).push()  # another batch's job
    (gated,) = FailedJob.objects.filter(name="tests.member")
    impostor = make_failed()
    lookalike(impostor, failed.pk)
    assert FailedJob.objects.filter(payload__contains=f'"batch":[{failed.pk},').count() == 2
    assert listed(admin_client.get(f"{FAILED}?batch={failed.pk}")) == [gated.pk]
    assert listed(admin_client.get(f"{FAILED}?batch={running.pk}")) == []
    if store_kind == "database":
        job_impostor = make_job()
        lookalike(job_impostor, running.pk)
        response = admin_client.get(f"{JOBS}?batch={running.pk}")
        mine = set(Job.objects.filter(name="tests.step").exclude(
            payload__contains=f'"batch":[{other.pk},').values_list("pk", flat=True))
        assert set(listed(response)) == mine and len(mine) == 3
        # The filter shows while in use, with the way back to every job.
        page = response.content.decode()
        assert 'data-filter-title="batch"' in page and f">#{running.pk}</a>" in page


def test_cancel_selected_batches_asks_then_cancels(admin_client, store):
    done, _, running = some_batches()
    assert "cancel_batches" in action_names(admin_client.get(BATCHES))
    assert "delete_selected" not in action_names(admin_client.get(BATCHES))
    response = admin_client.post(BATCHES, cancel_post(running.pk, confirmed=False))
    assert response.status_code == 200
    page = html_module.unescape(response.content.decode())
    assert "Cancel 1 batch?" in page and f"#{running.pk} album-7: running" in page
    assert 'name="post" value="yes"' in page
    assert Batch.objects.get(pk=running.pk).cancelled_at is None  # nothing yet
    response = admin_client.post(BATCHES, cancel_post(running.pk, done.pk), follow=True)
    assert texts(response) == [
        "1 batch cancelled: 3 waiting jobs removed now.",
        "1 batch had finished or was cancelled already: nothing changed.",
    ]
    run_jobs()
    running.refresh_from_db()
    assert (running.state, running.pending) == ("cancelled", 0)
    assert not Record.objects.filter(kind="step").exists()
    # Its finally_ only; the catch is the failed batch's, from before.
    assert [r.value for r in Record.objects.filter(kind="record").order_by("pk")] == [
        "catch", "finally"]


def test_cancel_across_a_filter(admin_client, store):
    _, _, running = some_batches()
    second = batch([step.call("x")]).push()
    data = {**cancel_post(running.pk), "select_across": "1"}
    response = admin_client.post(f"{BATCHES}?state=running", data, follow=True)
    assert texts(response)[0].startswith("2 batches cancelled")
    assert set(Batch.objects.filter(cancelled_at__isnull=False).values_list("pk", flat=True)
               ) == {running.pk, second.pk}


def test_an_id_that_is_not_a_number_changes_nothing(admin_client, store):
    _, _, running = some_batches()
    response = admin_client.post(BATCHES, {**cancel_post(running.pk),
                                           "_selected_action": [running.pk, "7; DROP"]},
                                 follow=True)
    assert texts(response) == ["Nothing changed: '7; DROP' is not a batch id."]
    assert Batch.objects.get(pk=running.pk).cancelled_at is None


def test_cancelling_needs_change_on_batch_and_a_forged_post_gets_403(staff, store):
    _, _, running = some_batches()
    client = staff("view_batch", "view_job", "view_failedjob")
    response = client.get(BATCHES)
    assert response.status_code == 200 and listed(response)[0] == running.pk
    assert "cancel_batches" not in action_names(response)
    assert client.post(BATCHES, cancel_post(running.pk)).status_code == 403
    assert client.post(BATCHES, cancel_post(running.pk, confirmed=False)).status_code == 403
    assert Batch.objects.get(pk=running.pk).cancelled_at is None


def test_the_lists_need_their_view_permission(client, django_user_model, store, store_kind):
    from django.contrib.auth.models import Permission

    _, _, running = some_batches()
    user = django_user_model.objects.create_user("viewer", is_staff=True)
    user.user_permissions.set(Permission.objects.filter(
        content_type__app_label="laterite_django", codename__in=["view_batch", "change_batch"]))
    client.force_login(user)
    assert client.get(BATCHES).status_code == 200
    assert "cancel_batches" in action_names(client.get(BATCHES))
    page = client.get(batch_url(running.pk)).content.decode()
    assert "?batch=" not in page  # no view permission on jobs or failed jobs: no links
    assert "None of its jobs" not in page
    # No fieldset for no link (with Redis, the note that its jobs wait there).
    assert ("laterite-batch-jobs" in page) == (store_kind != "database")
    user.user_permissions.clear()
    assert client.get(BATCHES).status_code == 403


def test_the_list_costs_the_same_queries_for_2_or_20_batches(admin_client, store):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    def queries() -> int:
        with CaptureQueriesContext(connection) as seen:
            assert admin_client.get(BATCHES).status_code == 200
        return len(seen)

    for i in range(2):
        batch([step.call(f"a{i}")], then=record.call("then")).push()
    few = queries()
    for i in range(18):
        batch([step.call(f"b{i}")], then=record.call("then")).push()
    assert queries() == few  # none per row


def test_deleting_a_batchs_jobs_counts_them_as_failed_so_it_ends(admin_client, store, store_kind):
    if store_kind != "database":
        pytest.skip("the Jobs list holds the database store's jobs")
    b = batch([step.call("kept"), step.call("gone")], then=record.call("then"),
              catch=record.call("catch"), finally_=record.call("finally")).push()
    (gone,) = Job.objects.filter(payload__contains='"gone"')
    data = {"action": "delete_jobs_selected", "_selected_action": [gone.pk], "post": "yes"}
    response = admin_client.post(JOBS, data, follow=True)
    assert texts(response) == ["1 job deleted."]
    run_jobs()
    b.refresh_from_db()
    assert (b.pending, b.failed, b.state) == (0, 1, "failed")
    assert [r.value for r in Record.objects.filter(kind="record").order_by("id")] == [
        "catch", "finally"]
    # A job's own page deletes it the same way.
    other = batch([step.call("alone")], finally_=record.call("alone-finally")).push()
    (alone,) = Job.objects.filter(payload__contains='"alone"')
    url = reverse("admin:laterite_django_job_delete", args=[alone.pk])
    admin_client.post(url, {"post": "yes"})
    run_jobs()
    other.refresh_from_db()
    assert (other.pending, other.failed) == (0, 1)
    assert Record.objects.filter(kind="record", value="alone-finally").count() == 1
