"""System checks: each bad setting is reported with what was given and what is allowed."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.test import override_settings

from laterite_django.checks import check_jobs, check_settings


def ids(messages) -> list[str]:
    return [m.id for m in messages]


def test_defaults_are_clean():
    assert check_settings() == []


@pytest.mark.parametrize(
    ("setting", "value", "code", "text"),
    [
        ("MODE", "eager", "laterite.E001", "LATERITE_QUEUE_MODE is 'eager'; allowed: 'external'"),
        ("STORE", "mongo", "laterite.E002", "allowed: 'database', 'redis'"),
        ("DATABASE", "other", "laterite.E003", "must name a database in DATABASES"),
        ("PREFIX", "", "laterite.E005", "non-empty string"),
        ("QUEUES", "default", "laterite.E006", "non-empty list of queue names"),
        ("QUEUES", ["a", "a"], "laterite.E006", "lists a queue twice"),
        ("RETRY_AFTER", 0, "laterite.E007", "seconds > 0"),
        ("POLL", "1", "laterite.E008", "seconds > 0"),
        ("WORKERS", 0, "laterite.E009", "integer >= 1"),
    ],
)
def test_bad_setting_is_an_error(setting, value, code, text):
    with override_settings(**{f"LATERITE_QUEUE_{setting}": value}):
        messages = check_settings()
    assert code in ids(messages)
    message = next(m for m in messages if m.id == code)
    assert text in message.msg and repr(value) in message.msg


def test_unknown_setting_is_a_warning():
    with override_settings(LATERITE_QUEUE_RETRIES=3):
        assert ids(check_settings()) == ["laterite.W002"]


def test_job_on_an_unlisted_queue_warns():
    with override_settings(LATERITE_QUEUE_QUEUES=["default"]):
        warnings = check_jobs()
    names = {w.msg.split("'")[1] for w in warnings}
    assert names == {"tests.mail", "tests.low"}
    assert all(w.id == "laterite.W001" for w in warnings)


def test_manage_py_check_fails_on_a_bad_setting():
    with override_settings(LATERITE_QUEUE_MODE="later"), pytest.raises(SystemCheckError) as e:
        call_command("check")
    assert "laterite.E001" in str(e.value)
