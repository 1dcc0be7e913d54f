"""LATERITE_QUEUE_STORE switched from the database to Redis with jobs still in the
database: `manage.py check --database` says how many and how to run them out
(laterite.W003), and the admin's Jobs list says what its rows are."""

from __future__ import annotations

import io
import os
from collections.abc import Iterator

import pytest
from django.core.management import call_command
from django.test import override_settings
from django.urls import reverse

from laterite_django.checks import check_jobs_left_in_the_database
from laterite_django.models import Job
from tests.conftest import redis_store_only
from tests.stores.test_store_errors import database_alias
from tests.testapp import jobs

__all__: list[str] = []

JOBS = reverse("admin:laterite_django_job_changelist")


def left_behind(database: str = "default") -> list:
    return check_jobs_left_in_the_database(databases=[database])


@pytest.fixture
def two_left(db) -> Iterator[list[int]]:
    """Two jobs pushed with the database store, then LATERITE_QUEUE_STORE = "redis"."""
    ids = [jobs.record.push("a").id, jobs.mail.push_in(3600, "b").id]
    with redis_store_only(f"laterite-test-switch-{os.getpid()}"):
        yield ids


def test_jobs_in_the_database_store_warn_when_the_store_is_redis(two_left):
    (warning,) = left_behind()
    assert warning.id == "laterite.W003"
    assert warning.msg == (
        "2 jobs wait in the database store (database 'default', table laterite_job), but "
        "LATERITE_QUEUE_STORE is 'redis': no worker of the Redis store runs them.")
    assert "LATERITE_QUEUE_STORE = 'database'" in warning.hint
    assert "queue_work --stop-when-empty" in warning.hint and "queue_clear" in warning.hint
    out = io.StringIO()
    call_command("check", "--database", "default", stdout=out, stderr=out)
    assert "laterite.W003" in out.getvalue()


def test_it_is_a_database_check_said_only_when_asked(two_left):
    out = io.StringIO()
    call_command("check", stdout=out, stderr=out)  # no --database: no query
    assert "laterite.W003" not in out.getvalue()
    assert check_jobs_left_in_the_database(databases=None) == []
    assert left_behind("other") == []


def test_nothing_is_said_with_no_job_left_or_on_the_database_store(db):
    with redis_store_only(f"laterite-test-switch-{os.getpid()}"):
        assert left_behind() == []
    jobs.record.push("a")
    assert left_behind() == []  # the database store runs it


def test_a_database_down_or_not_migrated_says_nothing(db, tmp_path):
    empty = {"ENGINE": "django.db.backends.sqlite3", "NAME": str(tmp_path / "empty.sqlite3")}
    nowhere = {"ENGINE": "django.db.backends.sqlite3",
               "NAME": str(tmp_path / "no-such-dir" / "queue.sqlite3")}
    down = {"ENGINE": "django.db.backends.postgresql", "HOST": "127.0.0.1", "PORT": "1",
            "NAME": "laterite_down", "USER": "postgres"}
    for alias, options in [("laterite_empty", empty), ("laterite_nofile", nowhere),
                           ("laterite_down", down)]:
        with database_alias(alias, **options), override_settings(
                LATERITE_QUEUE_STORE="redis", LATERITE_QUEUE_DATABASE=alias):
            assert left_behind(alias) == []


def test_the_redis_jobs_list_says_its_rows_are_left_in_the_database(admin_client, two_left):
    response = admin_client.get(JOBS)
    html = response.content.decode()
    assert "the list below holds none" not in html
    assert ("Jobs wait in Redis with this store: the summary counts them and the first "
            "list below shows them. The second list shows the jobs left in the database by "
            "the database store, which no worker of the Redis store runs") in html
    shown = {row.pk for row in response.context["cl"].result_list}
    assert shown == set(two_left) == set(Job.objects.values_list("pk", flat=True))
