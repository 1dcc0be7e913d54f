"""The admin's schedule list on every store: what it shows, its actions, its permissions."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission
from django.test import override_settings
from django.urls import reverse

from laterite_django.schedules import actions

SCHEDULES = reverse("admin:laterite_django_schedulerecord_changelist")
DEFINED = {"nightly": {"job": "tests.scheduled", "cron": "0 3 * * *",
                       "timezone": "Europe/Paris"},
           "ping": {"job": "tests.scheduled", "every": 30, "queue": "low"}}


@pytest.fixture
def configured(store):
    with override_settings(LATERITE_QUEUE_SCHEDULES=DEFINED):
        yield store


@pytest.fixture
def staff(client, django_user_model):
    def login(*codenames: str):
        user = django_user_model.objects.create_user("staff", is_staff=True)
        user.user_permissions.set(Permission.objects.filter(
            content_type__app_label="laterite_django", codename__in=codenames))
        client.force_login(user)
        return client

    return login


def test_the_list_shows_each_schedule_from_the_store(configured, admin_client):
    actions.pause("ping")
    html = admin_client.get(SCHEDULES).content.decode()
    assert "nightly" in html and "<code>0 3 * * *</code>" in html and "Europe/Paris" in html
    assert "<code>every 30s</code>" in html
    assert html.count('value="resume"') == 1 and html.count('value="pause"') == 1
    assert html.count('value="run"') == 2


def test_actions_go_through_the_store(configured, admin_client):
    response = admin_client.post(SCHEDULES, {"action": "pause", "name": "nightly"})
    assert response.status_code == 302
    assert configured.schedule_states(["nightly"])["nightly"].paused
    admin_client.post(SCHEDULES, {"action": "resume", "name": "nightly"})
    assert not configured.schedule_states(["nightly"])["nightly"].paused
    admin_client.post(SCHEDULES, {"action": "run", "name": "ping"})
    (job,) = configured.claim(["low"], "test")
    assert job.name == "tests.scheduled"
    state = configured.schedule_states(["ping"])["ping"]
    assert str(state.job_id) == str(job.id)
    html = admin_client.get(SCHEDULES).content.decode()
    assert f"#{job.id}" in html


def test_viewing_needs_view_and_acting_needs_change(configured, staff):
    client = staff("view_schedulerecord")
    html = client.get(SCHEDULES).content.decode()
    assert "nightly" in html and 'value="run"' not in html
    assert client.post(SCHEDULES, {"action": "run", "name": "ping"}).status_code == 403
    assert configured.claim(["low"], "test") == []


def test_without_permission_no_page(configured, staff):
    assert staff().get(SCHEDULES).status_code == 403


def test_an_unknown_schedule_is_a_message(configured, admin_client):
    response = admin_client.post(SCHEDULES, {"action": "pause", "name": "nope"}, follow=True)
    assert "No schedule is named" in response.content.decode()
