"""The admin and ordered sequences: the overview lists a held sequence (its failed head,
the jobs waiting behind it) with a button that lets it go on; the failed list's action
does the same for the selected rows; forgetting the failed head lets it go on too."""

from __future__ import annotations

import re

from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.test import override_settings
from django.urls import reverse

from laterite_django.models import FailedJob
from tests.admin.test_admin import JOBS, ids
from tests.admin.test_admin import staff as staff  # the fixture
from tests.testapp import jobs

OVERVIEW = reverse("admin:laterite_django_minutecount_changelist")
FAILED = reverse("admin:laterite_django_failedjob_changelist")


def held_sequence(store) -> FailedJob:
    """acct:1's head failed for good, two jobs waiting behind it; return its failed row."""
    for n in range(3):
        jobs.seq_step.push("acct:1", n)
    (head,) = store.claim(["low"], "test", 10)
    store.fail(head, "gave up")
    if hasattr(store, "move_outbox"):
        store.move_outbox()
    return FailedJob.objects.get()


def test_the_overview_shows_a_held_sequence_and_lets_it_go_on(admin_client, store):
    failed = held_sequence(store)
    html = admin_client.get(OVERVIEW).content.decode()
    section = html.split('data-queue="low"', 1)[1].split("</section>", 1)[0]
    row = section.split('data-sequence="acct:1"', 1)[1].split("</tr>", 1)[0]
    assert f"failed job #{failed.pk}" in row
    assert "<td>2</td>" in row
    release = reverse("admin:laterite_django_failedjob_release_sequence", args=[failed.pk])
    assert release in row
    response = admin_client.post(release, {"next": OVERVIEW})
    assert response.status_code == 302 and response["Location"] == OVERVIEW
    assert store.held_sequences() == []
    assert len(store.claim(["low"], "test", 10)) == 1  # the next one, alone
    assert FailedJob.objects.filter(pk=failed.pk).exists()  # still on the failed list
    assert 'data-fact="held-sequences"' not in admin_client.get(OVERVIEW).content.decode()


def test_the_failed_lists_action_lets_the_selected_heads_sequences_go_on(admin_client, store):
    failed = held_sequence(store)
    response = admin_client.post(FAILED, {"action": "release_sequences_selected",
                                          ACTION_CHECKBOX_NAME: [failed.pk]}, follow=True)
    assert "1 sequence goes on." in response.content.decode()
    assert store.held_sequences() == []
    response = admin_client.post(FAILED, {"action": "release_sequences_selected",
                                          ACTION_CHECKBOX_NAME: [failed.pk]}, follow=True)
    assert "None of the selected failed jobs holds a sequence." in response.content.decode()


def test_forgetting_the_failed_head_lets_its_sequence_go_on(admin_client, store):
    failed = held_sequence(store)
    admin_client.post(FAILED, {"action": "forget_selected", ACTION_CHECKBOX_NAME: [failed.pk],
                               "post": "yes"})
    assert not FailedJob.objects.exists()
    assert store.held_sequences() == []
    assert len(store.claim(["low"], "test", 10)) == 1


def test_releasing_needs_the_change_permission(staff, store):
    failed = held_sequence(store)
    client = staff("view_failedjob")
    release = reverse("admin:laterite_django_failedjob_release_sequence", args=[failed.pk])
    assert client.post(release).status_code == 403
    assert len(store.held_sequences()) == 1


def test_the_job_list_shows_jobs_behind_a_sequences_head_as_held(admin_client, db):
    """On the database store, a job behind its sequence's head waits due at HELD_AT: the
    list calls it held, not delayed, and its state filter finds it apart."""
    with override_settings(LATERITE_QUEUE_STORE="database"):
        first, second = (jobs.seq_step.push("acct:2", n) for n in range(2))
        html = admin_client.get(JOBS).content.decode()
        assert re.search(r'laterite-state-held"[^>]*>held</span>', html)
        assert "after the job before it in its sequence" in html
        assert "9000" not in html
        assert ids(admin_client.get(JOBS, {"state": "held"})) == {second.id}
        assert ids(admin_client.get(JOBS, {"state": "waiting"})) == {first.id}
        assert ids(admin_client.get(JOBS, {"state": "delayed"})) == set()
