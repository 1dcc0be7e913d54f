"""What a push refuses before anything is stored, on every store: values longer than their
columns, jobs that are not registered, dict keys that JSON would turn into strings, and
arguments the function cannot take."""

from __future__ import annotations

import pytest
from django.test import override_settings

from laterite_django import JobFunction, JobNotRegistered, job, registry
from laterite_django.core.sizes import NAME_MAX, QUEUE_MAX, TASK_PATH_MAX, UNIQUE_KEY_MAX
from laterite_django.exceptions import InvalidPayload
from laterite_django.models import FailedJob, Job, TaskResultRecord
from tests.jobs.conftest import nothing_stored
from tests.testapp import jobs


def test_the_limits_are_the_column_sizes():
    for model in (Job, FailedJob):
        assert model._meta.get_field("name").max_length == NAME_MAX == 200
        assert model._meta.get_field("queue").max_length == QUEUE_MAX == 100
        assert model._meta.get_field("unique_key").max_length == UNIQUE_KEY_MAX == 255
    assert TaskResultRecord._meta.get_field("task_path").max_length == TASK_PATH_MAX
    assert TaskResultRecord._meta.get_field("queue").max_length == QUEUE_MAX
    assert TaskResultRecord._meta.get_field("unique_key").max_length == UNIQUE_KEY_MAX


# -- lengths at definition ---------------------------------------------------------


def test_a_name_over_200_characters_is_refused_at_definition():
    name = "tests." + "n" * 195  # 201 characters
    with pytest.raises(ValueError) as e:
        job(name)(lambda: None)
    text = str(e.value)
    assert name[:30] in text and "201 characters" in text and "200" in text
    assert name not in registry


def test_a_queue_over_100_characters_is_refused_at_definition():
    queue = "q" * 101
    with pytest.raises(ValueError) as e:
        job("tests.long_queue", queue=queue)(lambda: None)
    text = str(e.value)
    assert "tests.long_queue" in text and "qqqqqqqqqq" in text
    assert "101 characters" in text and "100" in text
    assert "tests.long_queue" not in registry


def test_names_and_queues_at_their_limit_are_stored(store, scratch_jobs):
    name, queue = "n" * NAME_MAX, "q" * QUEUE_MAX
    scratch_jobs.append(name)

    @job(name, queue=queue, unique_key=lambda i: str(i) * UNIQUE_KEY_MAX)
    def at_the_limit(i: int) -> None: ...

    assert at_the_limit.push(7).status == "queued"
    assert at_the_limit.push(7).status == "duplicate"
    assert store.counts()[queue].waiting == 1


# -- lengths at every push, on every store -----------------------------------------


def test_a_queue_override_over_100_characters_is_refused_at_the_push(store):
    queue = "mail-" + "x" * 96  # 101 characters
    with pytest.raises(ValueError) as e:
        jobs.record.enqueue(["v"], {}, queue=queue)
    text = str(e.value)
    assert "'tests.record'" in text and queue[:20] in text
    assert "101 characters" in text and "100" in text
    for bad in ("", 5):
        with pytest.raises((TypeError, ValueError), match="queue must be a non-empty string"):
            jobs.record.enqueue(["v"], {}, queue=bad)
    assert nothing_stored(store)


def test_a_queue_changed_after_definition_is_checked_at_the_push(store, scratch_jobs):
    scratch_jobs.append("tests.requeued")

    @job("tests.requeued")
    def requeued() -> None: ...

    requeued.queue = "z" * 150
    for push in (requeued.push, lambda: requeued.push_in(60), lambda: requeued.push_many([()])):
        with pytest.raises(ValueError, match="150 characters"):
            push()
    assert nothing_stored(store)


def test_a_unique_key_over_255_characters_is_refused_at_the_push(store, scratch_jobs):
    scratch_jobs.append("tests.long_key")

    @job("tests.long_key", unique_key=lambda size: "k" * size)
    def long_key(size: int) -> None: ...

    for push in (
        lambda: long_key.push(256),
        lambda: long_key.push_in(5, 300),
        lambda: long_key.push_many([(1,), (256,)]),
    ):
        with pytest.raises(ValueError) as e:
            push()
        text = str(e.value)
        assert "'tests.long_key'" in text and "kkkkkkkkkk" in text and "255" in text
    assert nothing_stored(store)


# -- unregistered jobs --------------------------------------------------------------


def _plain(value: str) -> None:
    """A module-level function to make jobs of."""


def _other(value: str) -> None:
    """Another function, to take over a job's name."""


def test_a_job_function_never_registered_is_refused(store):
    loose = JobFunction(_plain, name="tests.loose")
    with pytest.raises(JobNotRegistered) as e:
        loose.push("x")
    assert "'tests.loose'" in str(e.value) and "not registered" in str(e.value)
    with pytest.raises(JobNotRegistered, match=r"tests\.loose"):
        loose.push_many([("x",)])
    with override_settings(LATERITE_QUEUE_MODE="inline"), pytest.raises(JobNotRegistered):
        loose.push("x")
    assert nothing_stored(store)


def test_a_job_whose_name_now_belongs_to_another_function_is_refused(store, scratch_jobs):
    scratch_jobs.append("tests.taken")
    first = job("tests.taken")(_plain)
    registry.unregister("tests.taken")
    second = job("tests.taken")(_other)
    with pytest.raises(JobNotRegistered) as e:
        first.push("x")
    text = str(e.value)
    assert "'tests.taken'" in text and "_plain" in text and "_other" in text
    assert second.push("y").status == "queued"
    assert store.counts()["default"].waiting == 1


def test_a_job_defined_again_by_the_same_function_still_pushes(store, scratch_jobs):
    # Re-importing a module (autoreload) registers a new JobFunction for the same function.
    scratch_jobs.append("tests.again")
    old = job("tests.again")(_plain)
    new = job("tests.again")(_plain)
    assert registry.get("tests.again") is new
    assert old.push("x").status == "queued"


# -- dict keys ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("call", "argument", "key"),
    [
        (lambda: jobs.add.push({1: "a", None: "b"}, 2), "positional argument 0", "1 (int)"),
        (lambda: jobs.add.push(1, [{"ok": {None: "x"}}]), "positional argument 1",
         "None (NoneType)"),
        (lambda: jobs.record.push(value={"a": [{True: 1}]}), "argument 'value'", "True (bool)"),
        (lambda: jobs.add.push_many([(1, 2), ({2.5: 0}, 3)]), "positional argument 0",
         "2.5 (float)"),
    ],
)
def test_non_string_dict_keys_are_refused(store, call, argument, key):
    with pytest.raises(InvalidPayload) as e:
        call()
    text = str(e.value)
    assert "Job 'tests." in text and argument in text and f"key {key}" in text
    assert "keys must be strings" in text
    assert nothing_stored(store)


def test_string_keys_and_dict_subclasses_are_fine(store):
    from collections import OrderedDict

    assert jobs.add.push({"1": "a"}, OrderedDict(b=[{"c": None}])).status == "queued"


@override_settings(LATERITE_QUEUE_MODE="inline")
def test_non_string_keys_are_refused_inline_too():
    with pytest.raises(InvalidPayload, match=r"key 1 \(int\)"):
        jobs.add.push({1: 1}, 2)


# -- arguments the function cannot take ---------------------------------------------


@pytest.mark.django_db
def test_every_argument_problem_is_named_at_once():
    with pytest.raises(TypeError) as e:
        jobs.add.push(y=1)
    text = str(e.value)
    assert "'tests.add' cannot be called with these arguments" in text
    assert "missing 'a', 'b'" in text and "unexpected 'y'" in text
    with pytest.raises(TypeError) as e:
        jobs.add.push(1, 2, 3, a=4)
    text = str(e.value)
    assert "takes 2 positional arguments but 3 were given" in text
    assert "'a' given twice" in text
