"""@job, pushing, the registry and the inline mode: no worker needed."""

from __future__ import annotations

import datetime as dt
from datetime import timedelta

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings
from django.utils import timezone

import laterite_django
from laterite_django import Fail, JobContext, JobNotRegistered, Pushed, Retry, job, registry
from laterite_django.core.backoff import delay_after
from laterite_django.exceptions import InvalidPayload
from laterite_django.payload import decode
from tests.testapp import jobs
from tests.testapp.models import Record


@pytest.fixture
def scratch_jobs():
    """Unregister jobs a test defines on the fly."""
    names: list[str] = []
    yield names
    for name in names:
        registry.unregister(name)


def test_public_surface():
    assert set(laterite_django.__all__) >= {"job", "JobContext", "Retry", "Fail", "Pushed"}
    assert laterite_django.registry.get("tests.record") is jobs.record


def test_autodiscovery_registered_the_test_app_jobs():
    assert "tests.noop" in registry.names()
    assert registry.get("tests.mail").queue == "mail"


def test_default_name_is_module_and_qualname(scratch_jobs):
    @job
    def plain() -> None: ...

    scratch_jobs.append(plain.name)
    qualname = "test_default_name_is_module_and_qualname.<locals>.plain"
    assert plain.name == f"tests.jobs.test_jobs.{qualname}"
    assert registry.get(plain.name) is plain
    assert plain.tries == 3 and plain.timeout == 60 and plain.queue == "default"


def test_duplicate_name_names_both_functions(scratch_jobs):
    scratch_jobs.append("tests.dupe")

    @job("tests.dupe")
    def first() -> None: ...

    with pytest.raises(ImproperlyConfigured) as e:
        @job("tests.dupe")
        def second() -> None: ...

    assert "first" in str(e.value) and "second" in str(e.value)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"tries": -1}, "tries must be an integer >= 0, got -1"),
        ({"timeout": 0}, "timeout must be seconds > 0 or None, got 0"),
        ({"queue": ""}, "queue must be a non-empty string"),
        ({"backoff": "fast"}, "backoff must be a number"),
        ({"backoff": []}, "a backoff list cannot be empty"),
        ({"backoff": [1, -2]}, "got -2"),
        ({"retry_until": 5}, "retry_until must be a timedelta"),
        ({"unique_key": "key"}, "unique_key must be callable"),
        ({"max_snoozes": -1}, "max_snoozes must be an integer >= 0 (0: no ceiling), got -1"),
        ({"max_snoozes": 2.5}, "max_snoozes must be an integer >= 0 (0: no ceiling), got 2.5"),
    ],
)
def test_bad_options_are_named(options, message):
    with pytest.raises((TypeError, ValueError)) as e:
        job("tests.bad", **options)(lambda: None)
    assert message in str(e.value) and "tests.bad" in str(e.value)
    assert "tests.bad" not in registry


def test_backoff_forms():
    assert [delay_after(None, n) for n in (1, 2, 3, 9, 20)] == [10, 20, 40, 2560, 2560]
    assert delay_after(5, 4) == 5
    assert [delay_after([1, 5, 30], n) for n in (1, 2, 3, 4)] == [1, 5, 30, 30]
    assert delay_after(lambda attempt: attempt * 7, 3) == 21


@pytest.mark.django_db
def test_non_json_argument_fails_at_the_push_naming_it():
    with pytest.raises(InvalidPayload) as e:
        jobs.record.push(value=timezone.now())
    assert "'tests.record'" in str(e.value) and "argument 'value'" in str(e.value)
    with pytest.raises(InvalidPayload) as e:
        jobs.add.push(1, {1, 2})
    assert "positional argument 1" in str(e.value) and "set" in str(e.value)


@pytest.mark.django_db
def test_wrong_arguments_fail_at_the_push():
    with pytest.raises(TypeError, match=r"'tests\.add' cannot be called"):
        jobs.add.push(1)
    with pytest.raises(TypeError, match="push_many entry 1"):
        jobs.add.push_many([(1, 2), 3])


def test_unknown_name_is_a_clear_error():
    with pytest.raises(JobNotRegistered, match=r"No job is named 'nope'.*tests\.add"):
        registry.get("nope")


@pytest.mark.django_db
def test_push_at_needs_an_aware_datetime():
    with pytest.raises(ValueError, match="aware datetime"):
        jobs.record.push_at(dt.datetime(2030, 1, 1), "x")


def test_payload_decoding_errors():
    assert decode('{"args": [1], "kwargs": {"a": 2}}') == ([1], {"a": 2})
    for bad, message in [
        ("[1]", "must be an object"),
        ('{"args": 1}', '"args" must be a list'),
        ('{"kwargs": []}', '"kwargs" must be an object'),
        ('{"args": [], "extra": 1}', "unknown keys ['extra']"),
        ("{", "not valid JSON"),
    ]:
        with pytest.raises(InvalidPayload, match=None) as e:
            decode(bad)
        assert message in str(e.value)


@pytest.mark.django_db
def test_push_variants_store_when_and_what(transactional_db):
    pushed = jobs.record.push("now")
    assert isinstance(pushed, Pushed) and pushed.status == "queued" and pushed.queued
    later = jobs.record.push_in(timedelta(minutes=5), value="later")
    at = jobs.record.push_at(timezone.now() + timedelta(hours=1), "at")
    from laterite_django.models import Job

    rows = {row.id: row for row in Job.objects.all()}
    assert rows[pushed.id].available_at <= timezone.now()
    assert rows[later.id].available_at > timezone.now() + timedelta(minutes=4)
    assert rows[later.id].payload == '{"args":[],"kwargs":{"value":"later"}}'
    assert rows[at.id].available_at > timezone.now() + timedelta(minutes=59)
    many = jobs.add.push_many([(1, 2), {"a": 3, "b": 4}])
    assert [p.status for p in many] == ["queued", "queued"]
    assert jobs.unique.push(5).status == "queued"
    assert jobs.unique.push(5).status == "duplicate"
    assert jobs.mail.push("m") and Job.objects.get(name="tests.mail").queue == "mail"


@pytest.mark.django_db
def test_retry_until_is_computed_once_at_the_push(scratch_jobs):
    deadline = timezone.now() + timedelta(days=1)
    scratch_jobs.append("tests.deadline")

    @job("tests.deadline", retry_until=lambda order_id: deadline)
    def with_deadline(order_id: int) -> None: ...

    from laterite_django.models import Job

    with_deadline.push(3)
    assert Job.objects.get(name="tests.deadline").retry_until == deadline


@override_settings(LATERITE_QUEUE_MODE="inline")
@pytest.mark.django_db(transaction=True)  # the async job writes from another thread
def test_inline_mode_runs_at_the_push_and_raises():
    from laterite_django.models import Job

    ran = jobs.record.push("inline")
    assert ran == Pushed("ran", None, "inline")
    assert Record.objects.get().attempt == 1
    assert jobs.async_record.push("async").result == "async"
    assert jobs.add.push_many([(1, 2), (3, 4)])[1].result == 7
    with pytest.raises(Fail, match="no such thing"):
        jobs.fail_now.push("x")
    with pytest.raises(RuntimeError, match="flaky attempt 1"):
        jobs.flaky.push("f", succeed_on=2)
    with pytest.raises(InvalidPayload):
        jobs.record.push(object())
    assert Job.objects.count() == 0


@override_settings(LATERITE_QUEUE_MODE="inline")
@pytest.mark.django_db
def test_inline_context(scratch_jobs):
    seen: list[JobContext] = []
    scratch_jobs.append("tests.context")

    @job("tests.context", queue="mail")
    def context(cx: JobContext) -> None:
        seen.append(cx)

    context.push()
    (cx,) = seen
    assert (cx.id, cx.name, cx.queue, cx.attempt) == (None, "tests.context", "mail", 1)


def test_retry_and_fail_carry_their_message():
    assert Retry("later", delay=3).delay == 3 and str(Retry("later")) == "later"
    assert Fail("never").message == "never"


def test_calling_a_job_runs_the_function():
    assert jobs.add(2, 3) == 5
