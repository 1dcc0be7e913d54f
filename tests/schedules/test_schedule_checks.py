"""Bad schedules fail `manage.py check`, each message naming its schedule (laterite.E02x),
and stop a scheduler from starting where no check ran."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.test import override_settings

from laterite_django import job
from laterite_django.checks import check_schedules
from laterite_django.exceptions import LateriteConfigurationError
from laterite_django.registry import registry
from laterite_django.schedules.definition import schedules


def checked(**definitions) -> list:
    with override_settings(LATERITE_QUEUE_SCHEDULES=definitions):
        return check_schedules()


def test_good_schedules_are_clean():
    assert checked(
        nightly={"job": "tests.noop", "cron": "0 3 * * *"},
        digest={"job": "tests.record", "cron": "*/15 8-18 * * mon-fri",
                "kwargs": {"value": "x"}, "timezone": "Europe/Paris"},
        ping={"job": "tests.noop", "every": 30, "missed": "all", "overlap": False,
              "queue": "low"},
        short={"job": "tests.add", "every": timedelta(minutes=5), "args": [1, 2],
               "missed": "latest"},
        hourly={"job": "tests.noop", "cron": "@hourly", "missed": "all", "missed_limit": 48},
    ) == []


@pytest.mark.parametrize(("definition", "code", "text"), [
    ({"job": "tests.noop", "cron": "0 3 * *"}, "E022", "has 4 fields"),
    ({"job": "tests.noop", "cron": "0 25 * * *"}, "E022", "is not valid"),
    ({"job": "tests.noop"}, "E022", "exactly one of cron and every"),
    ({"job": "tests.noop", "cron": "@daily", "every": 60}, "E022", "both cron and every"),
    ({"job": "tests.noop", "every": 0}, "E022", "every must be seconds"),
    ({"job": "tests.noop", "every": "60"}, "E022", "every must be seconds"),
    ({"job": "tests.noop", "every": 60, "timezone": "Mars/Olympus"}, "E023",
     "'Mars/Olympus' is not an IANA zone"),
    ({"job": "tests.nope", "every": 60}, "E021", "job 'tests.nope' is not registered"),
    ({"every": 60}, "E021", "it names no job"),
    ({"job": "tests.add", "every": 60}, "E024", "cannot be called with these arguments"),
    ({"job": "tests.add", "every": 60, "args": [1, 2, 3]}, "E024", "cannot be called"),
    ({"job": "tests.noop", "every": 60, "kwargs": {"when": object()}}, "E024", "cannot be"),
    ({"job": "tests.noop", "every": 60, "args": "1"}, "E024", "args must be a list"),
    ({"job": "tests.noop", "every": 60, "missed": "some"}, "E025", "missed is 'some'"),
    ({"job": "tests.noop", "every": 60, "missed_limit": 0}, "E025", "missed_limit must be"),
    ({"job": "tests.noop", "every": 60, "missed_limit": "10"}, "E025", "missed_limit must"),
    ({"job": "tests.noop", "every": 60, "missed_limit": True}, "E025", "missed_limit must"),
    ({"job": "tests.noop", "every": 60, "missed_limit": 1001}, "E025", "missed_limit must"),
    ({"job": "tests.noop", "every": 60, "overlap": "no"}, "E026", "overlap must be"),
    ({"job": "tests.noop", "every": 60, "queue": ""}, "E026", "queue must be"),
    ({"job": "tests.noop", "every": 60, "cronn": "x"}, "E020", "unknown key cronn"),
    ("tests.noop", "E020", "must be a dict"),
])
def test_each_bad_schedule_is_an_error_naming_it(definition, code, text):
    messages = checked(report=definition)
    assert [m.id for m in messages] == [f"laterite.{code}"]
    assert messages[0].msg.startswith("Schedule 'report': ")
    assert text in messages[0].msg


def test_the_setting_must_be_a_dict():
    with override_settings(LATERITE_QUEUE_SCHEDULES=["nightly"]):
        messages = check_schedules()
    assert [m.id for m in messages] == ["laterite.E020"]


def test_manage_py_check_fails_naming_the_schedule():
    with override_settings(LATERITE_QUEUE_SCHEDULES={
            "nightly-report": {"job": "tests.noop", "cron": "0 3 * * *",
                               "timezone": "Europe/Nowhere"}}), \
            pytest.raises(SystemCheckError, match="Schedule 'nightly-report'"):
        call_command("check")


def test_a_scheduler_refuses_a_bad_schedule_where_no_check_ran():
    with override_settings(LATERITE_QUEUE_SCHEDULES={
            "ping": {"job": "tests.noop", "every": 60, "missed": "never"}}), \
            pytest.raises(LateriteConfigurationError, match="Schedule 'ping': missed"):
        schedules()


@pytest.fixture
def shorthand():
    """A job with its own schedule, registered for one test."""
    made = []

    def make(name: str, rule, **options):
        found = job(name, schedule=rule, **options)(lambda: None)
        made.append(name)
        return found

    yield make
    for name in made:
        registry.unregister(name)


def test_job_shorthand_makes_a_schedule_named_after_the_job(shorthand):
    shorthand("tests.nightly_short", "0 3 * * *")
    shorthand("tests.often_short", timedelta(seconds=90))
    found = {s.name: s for s in schedules()}
    assert found["tests.nightly_short"].cron == "0 3 * * *"
    assert found["tests.nightly_short"].job == "tests.nightly_short"
    assert found["tests.often_short"].every == timedelta(seconds=90)


def test_job_shorthand_errors_name_the_job(shorthand):
    shorthand("tests.bad_short", "every day")
    with override_settings(LATERITE_QUEUE_SCHEDULES={
            "tests.often_short": {"job": "tests.noop", "every": 5}}):
        shorthand("tests.often_short", 60)
        messages = check_schedules()
    assert {m.id for m in messages} == {"laterite.E022", "laterite.E027"}
    assert any("Schedule 'tests.bad_short'" in m.msg for m in messages)
    assert any("'tests.often_short' is defined twice" in m.msg for m in messages)


def test_shorthand_on_a_job_that_needs_arguments_is_an_error(shorthand):
    found = job("tests.needs_args_short", schedule="@hourly")(lambda user_id: None)
    try:
        messages = check_schedules()
    finally:
        registry.unregister(found.name)
    assert [m.id for m in messages] == ["laterite.E024"]
    assert "Schedule 'tests.needs_args_short'" in messages[0].msg
