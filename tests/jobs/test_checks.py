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
    assert names == {"tests.mail", "tests.low", "tests.step_then_pause", "tests.seq_step",
                     "tests.seq_go_on"}
    assert all(w.id == "laterite.W001" for w in warnings)


def test_manage_py_check_fails_on_a_bad_setting():
    with override_settings(LATERITE_QUEUE_MODE="later"), pytest.raises(SystemCheckError) as e:
        call_command("check")
    assert "laterite.E001" in str(e.value)


# -- the same rules at use, where no check runs -------------------------------------

BAD_SETTINGS = [
    ("MODE", "eager", "allowed: 'external', 'worker', 'inline'"),
    ("STORE", "mongo", "allowed: 'database', 'redis'"),
    ("DATABASE", "other", "must name a database in DATABASES"),
    ("REDIS", "nowhere", "must name a cache in CACHES"),
    ("PREFIX", "", "non-empty string"),
    ("QUEUES", "default", "non-empty list of queue names"),
    ("QUEUES", ["a", "a"], "lists a queue twice"),
    ("RETRY_AFTER", -5, "seconds > 0"),
    ("RETRY_AFTER", True, "seconds > 0"),
    ("POLL", "1", "seconds > 0"),
    ("WORKERS", 0, "integer >= 1"),
]


@pytest.mark.parametrize(("setting", "value", "text"), BAD_SETTINGS)
def test_reading_a_bad_setting_raises_what_the_check_reports(setting, value, text):
    from laterite_django.conf import settings
    from laterite_django.exceptions import LateriteConfigurationError

    with override_settings(**{f"LATERITE_QUEUE_{setting}": value}):
        with pytest.raises(LateriteConfigurationError) as e:
            getattr(settings, setting)
        # The check says the same, from the same rule (REDIS: when the store is Redis).
        store = "redis" if setting == "REDIS" else value if setting == "STORE" else "database"
        with override_settings(LATERITE_QUEUE_STORE=store):
            messages = [m.msg for m in check_settings()]
    message = str(e.value)
    assert message.startswith(f"LATERITE_QUEUE_{setting} is {value!r}; ")
    assert text in message
    assert message in messages


def test_good_settings_read_as_given():
    from laterite_django.conf import settings

    with override_settings(LATERITE_QUEUE_RETRY_AFTER=2.5, LATERITE_QUEUE_QUEUES=("a", "b")):
        assert settings.RETRY_AFTER == 2.5 and settings.QUEUES == ("a", "b")
    assert settings.MODE == "external"


def test_checks_report_bad_settings_rather_than_raise():
    compat = pytest.importorskip("laterite_django.tasks.compat", exc_type=ImportError)
    task_backends = compat.task_backends

    with override_settings(LATERITE_QUEUE_QUEUES="mail", LATERITE_QUEUE_RETRY_AFTER=-1):
        assert {"laterite.E006", "laterite.E007"} <= set(ids(check_settings()))
        assert check_jobs() == []
        assert list(task_backends["default"].check()) == []


@pytest.mark.django_db
def test_worker_mode_refuses_to_start_on_a_bad_setting():
    from laterite_django.exceptions import LateriteConfigurationError
    from laterite_django.models import Job
    from laterite_django.worker import threads
    from tests.testapp import jobs

    try:
        with override_settings(LATERITE_QUEUE_MODE="worker", LATERITE_QUEUE_RETRY_AFTER=-5):
            with pytest.raises(LateriteConfigurationError, match="LATERITE_QUEUE_RETRY_AFTER"):
                jobs.record.push("x")
            assert threads.running() == []
    finally:
        threads.stop_all()
    assert not Job.objects.exists()


def test_queue_work_with_skip_checks_refuses_a_bad_setting(store, workers):
    from laterite_django.models import Job
    from tests.testapp import jobs
    from tests.testapp.models import Record

    jobs.record.push("never")
    result = workers.run("--skip-checks", "--stop-when-empty",
                         env={"LATERITE_TEST_RETRY_AFTER": "-5"})
    assert result.returncode != 0
    assert "LATERITE_QUEUE_RETRY_AFTER is -5.0; it must be seconds > 0" in result.stderr
    assert "Traceback" not in result.stderr
    assert not Record.objects.exists()
    assert store.counts()["default"].waiting == 1
    if store.__class__.__name__ == "DatabaseStore":
        assert Job.objects.get().attempts == 0


def test_a_checked_setting_is_kept_until_a_setting_changes():
    from django.conf import settings as django_settings

    from laterite_django.conf import settings

    assert settings.POLL == django_settings.LATERITE_QUEUE_POLL
    with override_settings(LATERITE_QUEUE_POLL=7):
        assert settings.POLL == 7
        with override_settings(CACHES={**django_settings.CACHES, "other": {
                "BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}):
            assert settings.POLL == 7
        with override_settings(LATERITE_QUEUE_DATABASE="nowhere"), pytest.raises(
                Exception, match="LATERITE_QUEUE_DATABASE is 'nowhere'"):
            _ = settings.DATABASE
    assert settings.POLL == django_settings.LATERITE_QUEUE_POLL
    # A bad value is refused at every read, never kept.
    with override_settings(LATERITE_QUEUE_POLL=0):
        for _ in range(2):
            with pytest.raises(Exception, match="LATERITE_QUEUE_POLL is 0"):
                _ = settings.POLL
    assert settings.DATABASE == "default"
