"""What LateriteBackend accepts and refuses: Django's task validation plus laterite's options,
and its system checks. No worker and no database needed."""

from __future__ import annotations

import pytest

pytest.importorskip(
    "laterite_django.tasks.compat",
    reason="needs Django's Tasks framework: Django 6+, or the django-tasks backport",
    exc_type=ImportError,
)

from datetime import datetime, timedelta

from django.core import checks
from django.test import override_settings
from django.utils import timezone

from laterite_django.tasks import DEFAULT, LateriteBackend, LateriteTask
from laterite_django.tasks.compat import (
    TASK_MAX_PRIORITY,
    TASK_MIN_PRIORITY,
    InvalidTask,
    task,
    task_backends,
)
from tests.testapp import task_functions as tasks
from tests.testapp.task_functions import TASK_OPTIONS

needs_task_options = pytest.mark.skipif(
    not TASK_OPTIONS, reason="this Django's @task does not pass keyword arguments on"
)

TASKS_SETTING = {
    "default": {
        "BACKEND": "laterite_django.tasks.LateriteBackend",
        "QUEUES": ["default", "mail"],
    }
}


def backend() -> LateriteBackend:
    return task_backends["default"]


def test_capabilities():
    b = backend()
    assert isinstance(b, LateriteBackend)
    assert (b.supports_defer, b.supports_priority, b.supports_async_task,
            b.supports_get_result) == (True, True, True, True)
    assert b.task_class is LateriteTask
    assert isinstance(tasks.add, LateriteTask)
    assert tasks.add.tries is DEFAULT


def test_options_default_and_from_settings():
    with override_settings(TASKS=TASKS_SETTING):
        b = backend()
        assert (b.tries, b.backoff, b.timeout, b.result_ttl) == (3, None, 60, 7 * 24 * 3600)
        assert b.queues == {"default", "mail"}
    # tests/settings.py: {"TRIES": 2, "BACKOFF": 0, "TIMEOUT": 30, "RESULT_TTL": 3600}
    assert backend().run_options(tasks.add) == (2, 0, 30)


@needs_task_options
def test_task_options_override_the_backend():
    assert backend().run_options(tasks.flaky_four) == (4, [0], 30)
    assert backend().run_options(tasks.too_slow) == (1, 0, 0.5)
    # .using() keeps them.
    assert backend().run_options(tasks.flaky_four.using(priority=3)) == (4, [0], 30)


def local_function() -> None:
    """Stands in for a module-level function in the tests below."""


def test_function_must_be_module_level():
    def inner() -> None:
        pass

    for function in (any, inner):
        with pytest.raises(InvalidTask, match="Task function must be defined at a module level"):
            task()(function)


def test_context_needs_a_first_argument_named_context():
    with pytest.raises(InvalidTask, match="first argument of 'context'"):
        task(takes_context=True)(local_function)


def test_async_functions_are_accepted():
    assert tasks.noop_async.get_backend() is backend()


def test_priority_bounds():
    message = (f"priority must be a whole number between {TASK_MIN_PRIORITY} and "
               f"{TASK_MAX_PRIORITY}")
    for bad in (-101, 101, 3.1):
        with pytest.raises(InvalidTask, match=message):
            tasks.noop.using(priority=bad)
    for good in (-100, 0, 100):
        assert tasks.noop.using(priority=good).priority == good


def test_run_after_must_be_aware():
    with pytest.raises(InvalidTask, match="run_after must be an aware datetime"):
        tasks.noop.using(run_after=datetime.now())  # naive on purpose
    later = timezone.now() + timedelta(minutes=5)
    assert tasks.noop.using(run_after=later).run_after == later


def test_queue_must_be_one_of_the_backends():
    with pytest.raises(InvalidTask, match="Queue 'queue-2' is not valid for backend"):
        tasks.noop.using(queue_name="queue-2")
    assert tasks.noop.using(queue_name="mail").queue_name == "mail"
    with override_settings(TASKS={"default": {**TASKS_SETTING["default"], "QUEUES": []}}):
        # No QUEUES: any queue will do.
        assert tasks.noop.using(queue_name="queue-2").queue_name == "queue-2"


def test_validate_on_enqueue():
    unknown_queue = tasks.noop.using(queue_name="low")
    with (
        override_settings(TASKS=TASKS_SETTING),
        pytest.raises(InvalidTask, match="Queue 'low' is not valid for backend"),
    ):
        unknown_queue.enqueue()


@needs_task_options
@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"tries": -1}, "tries must be an integer >= 0 (0 = retry without end), got -1"),
        ({"tries": "3"}, "tries must be an integer >= 0 (0 = retry without end), got '3'"),
        ({"timeout": 0}, "timeout must be seconds > 0 or None (no limit), got 0"),
        ({"backoff": -1}, "backoff must be >= 0, got -1"),
        ({"backoff": "soon"}, "backoff must be a number"),
        ({"unique_key": "user"}, "unique_key must be callable"),
    ],
)
def test_bad_task_options_name_the_value(options, message):
    path = "tests.tasks.test_tasks_validation.local_function"
    with pytest.raises(InvalidTask, match=f"Task '{path}': "
                                          f"{message.replace('(', '.').replace(')', '.')}"):
        task(**options)(local_function)


def test_bad_backend_options_are_named_at_validation_and_by_checks():
    broken = {
        "default": {
            **TASKS_SETTING["default"],
            "OPTIONS": {"TRIES": -2, "TIMEOUT": "long", "RESULT_TTL": 0, "RETRIES": 3},
        }
    }
    with override_settings(TASKS=broken):
        with pytest.raises(InvalidTask, match=r"the backend's OPTIONS\['TRIES'\] must be an "
                                              r"integer >= 0 .* got -2"):
            task()(local_function)
        messages = list(backend().check())
    assert [(m.id, m.level) for m in messages] == [
        ("laterite.E102", checks.ERROR),
        ("laterite.E103", checks.ERROR),
        ("laterite.E103", checks.ERROR),
        ("laterite.E103", checks.ERROR),
    ]
    assert "'RETRIES', which LateriteBackend does not know" in messages[0].msg
    assert "['TRIES'] must be an integer >= 0" in messages[1].msg
    assert "['TIMEOUT'] must be seconds > 0 or None (no limit), got 'long'" in messages[2].msg
    assert "['RESULT_TTL'] must be seconds > 0 or None (kept for good), got 0" in messages[3].msg


def test_check_warns_of_queues_no_worker_takes_from():
    with override_settings(TASKS={"default": {**TASKS_SETTING["default"],
                                              "QUEUES": ["default", "reports"]}}):
        messages = list(backend().check())
    assert [m.id for m in messages] == ["laterite.W101"]
    assert "queue 'reports'" in messages[0].msg
    assert "queue_work --queue reports" in messages[0].hint


def test_the_test_settings_pass_the_checks(db):
    assert list(backend().check()) == []
    ours = {"laterite.E101", "laterite.E102", "laterite.E103", "laterite.W101"}
    assert [m for m in checks.run_checks() if m.id in ours] == []


def test_a_queue_name_longer_than_its_column_is_invalid():
    long = "q" * 101
    with override_settings(TASKS={"default": {**TASKS_SETTING["default"], "QUEUES": []}}):
        with pytest.raises(InvalidTask) as e:
            tasks.noop.using(queue_name=long)
        assert "qqqqqqqqqq" in str(e.value) and "101 characters" in str(e.value)
        assert "100" in str(e.value)
        assert tasks.noop.using(queue_name="q" * 100).queue_name == "q" * 100


@pytest.mark.django_db
def test_arguments_with_keys_that_are_not_strings_are_refused_naming_the_task():
    from laterite_django.exceptions import InvalidPayload
    from laterite_django.models import TaskResultRecord

    with pytest.raises(InvalidPayload) as e:
        tasks.echo.enqueue({1: "a"})
    text = str(e.value)
    assert f"'{tasks.__name__}.echo'" in text and "key 1 (int)" in text
    assert not TaskResultRecord.objects.exists()
