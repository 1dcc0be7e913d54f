"""The admin while its store cannot be reached: every page and action that asks the store
answers with an admin message naming the store and what is wrong, never a server error.

Redis down: a cache on a port where nothing listens (the lists, in the database, still
show). PostgreSQL down: the queue's database is an alias on a closed port (the admin's
own users and sessions stay on the test database).
"""

from __future__ import annotations

import html
import warnings
from collections.abc import Iterator

import pytest
from django.test import override_settings
from django.urls import reverse
from django.utils import timezone

from laterite_django.models import Batch
from laterite_django.stores import reset_store
from tests.admin.test_admin import (
    FAILED,
    JOBS,
    failed_url,
    job_url,
    make_failed,
    redis_down,  # noqa: F401 -- a fixture
    texts,
)
from tests.stores.test_store_errors import database_alias

pytestmark = pytest.mark.django_db

PAUSE = reverse("admin:laterite_django_job_pause")
BATCHES = reverse("admin:laterite_django_batch_changelist")
OVERVIEW = reverse("admin:laterite_django_minutecount_changelist")
INDEX = reverse("admin:index")
REDIS_DOWN = "The redis store cannot be reached: cache 'down' (Redis at 127.0.0.1:1, db 0)"
POSTGRES_DOWN = ("The database store cannot be reached: database 'laterite_down' "
                 "(PostgreSQL at 127.0.0.1:1, name 'laterite_down')")


@pytest.fixture
def postgres_down() -> Iterator[None]:
    """The database store on a PostgreSQL that cannot be reached (a closed port)."""
    pytest.importorskip("psycopg")
    down = {"ENGINE": "django.db.backends.postgresql", "HOST": "127.0.0.1", "PORT": "1",
            "NAME": "laterite_down", "USER": "postgres"}
    from django.conf import settings

    override = override_settings(
        DATABASES={**settings.DATABASES, "laterite_down": down},
        LATERITE_QUEUE_STORE="database", LATERITE_QUEUE_DATABASE="laterite_down")
    with database_alias("laterite_down", **down):
        with warnings.catch_warnings():  # Django warns of DATABASES overridden
            warnings.simplefilter("ignore")
            override.enable()
        reset_store()
        try:
            yield
        finally:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                override.disable()
            reset_store()


def said_down(response, down: str, *, to: str) -> str:
    """Assert the answer is a redirect to `to` with an error message naming the store."""
    assert response.status_code == 302, response.status_code
    assert response["Location"].split("?")[0] == to
    errors = [t for t in texts(response) if down in t]
    assert errors, texts(response)
    assert "Connection refused" in errors[0] or "refused" in errors[0].lower()
    return errors[0]


# -- Redis down -------------------------------------------------------------------------


@pytest.mark.parametrize("do", ["pause", "resume"])
def test_pause_and_resume_say_redis_is_down(admin_client, redis_down, do):  # noqa: F811
    response = admin_client.post(PAUSE, {"queue": "default", "do": do})
    said = said_down(response, REDIS_DOWN, to=JOBS)
    assert said.startswith("Not done: ")


@pytest.mark.parametrize("action", ["run_now", "cancel_selected"])
def test_job_actions_say_redis_is_down(admin_client, redis_down, action):  # noqa: F811
    # The Redis store keeps its jobs in Redis: a ticked id goes to the store as sent.
    response = admin_client.post(JOBS, {"action": action, "_selected_action": ["12"]})
    said_down(response, REDIS_DOWN, to=JOBS)


def test_cancelling_a_batch_says_redis_is_down(admin_client, redis_down):  # noqa: F811
    batch = Batch.objects.create(name="b", total=1, pending=1, created_at=timezone.now())
    response = admin_client.post(BATCHES, {"action": "cancel_batches", "post": "yes",
                                           "_selected_action": [str(batch.pk)]})
    said_down(response, REDIS_DOWN, to=BATCHES)


def test_the_lists_and_the_overview_name_redis_when_it_is_down(admin_client,
                                                                redis_down):  # noqa: F811
    for url in (JOBS, FAILED, OVERVIEW):
        response = admin_client.get(url)
        assert response.status_code == 200
        assert html.escape(REDIS_DOWN) in response.content.decode()


# -- PostgreSQL down --------------------------------------------------------------------


@pytest.mark.parametrize("url", [JOBS, FAILED, BATCHES])
def test_a_list_says_postgres_is_down(admin_client, postgres_down, url):
    said_down(admin_client.get(url), POSTGRES_DOWN, to=INDEX)


@pytest.mark.parametrize("url", [job_url("change", 1), failed_url("change", 1)])
def test_a_detail_page_says_postgres_is_down(admin_client, postgres_down, url):
    said_down(admin_client.get(url), POSTGRES_DOWN, to=INDEX)


def test_the_overview_names_postgres_when_it_is_down(admin_client, postgres_down):
    response = admin_client.get(OVERVIEW)
    assert response.status_code == 200
    assert html.escape(POSTGRES_DOWN) in response.content.decode()


@pytest.mark.parametrize("do", ["pause", "resume"])
def test_pause_and_resume_say_postgres_is_down(admin_client, postgres_down, do):
    said_down(admin_client.post(PAUSE, {"queue": "default", "do": do}), POSTGRES_DOWN, to=JOBS)


@pytest.mark.parametrize(("url", "action"), [
    (JOBS, "run_now"), (JOBS, "cancel_selected"), (JOBS, "delete_jobs_selected"),
    (FAILED, "retry_selected"), (FAILED, "forget_selected"), (BATCHES, "cancel_batches"),
])
def test_list_actions_say_postgres_is_down(admin_client, postgres_down, url, action):
    response = admin_client.post(url, {"action": action, "post": "yes",
                                       "_selected_action": ["12"]})
    said_down(response, POSTGRES_DOWN, to=url)


@pytest.mark.parametrize("url", [job_url("run_now", 1), failed_url("retry", 1),
                                 failed_url("delete", 1)])
def test_detail_buttons_say_postgres_is_down(admin_client, postgres_down, url):
    response = admin_client.post(url, {"post": "yes"})
    assert response.status_code == 302
    assert any(POSTGRES_DOWN in t for t in texts(response)), texts(response)


def test_the_failed_list_still_retries_when_redis_is_down(admin_client,
                                                           redis_down):  # noqa: F811
    """The failed list is in the database: a retry there leaves the jobs to the outbox
    or says Redis is down, never a server error."""
    failed = make_failed()
    response = admin_client.post(failed_url("retry", failed.pk))
    assert response.status_code == 302
