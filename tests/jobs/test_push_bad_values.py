"""Values no store can keep, refused at the push before any store is touched, with the
same exception and message on every store: a NUL or a lone surrogate in a name, queue
or key, an argument nested too deeply or holding a lone surrogate, a delay or a moment
out of range, a priority outside the smallint column."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import pytest
from django.db import transaction
from django.utils import timezone

from laterite_django import job, registry
from laterite_django.exceptions import InvalidPayload
from laterite_django.models import Job
from tests.jobs.conftest import nothing_stored
from tests.testapp import jobs

# The range of PostgreSQL's smallint, the priority column's type (Job.priority).
PRIORITY_MIN, PRIORITY_MAX = -32768, 32767


def refused(error: type[Exception], push, *, atomic: bool = False) -> str:
    """Run `push` (inside transaction.atomic() with `atomic`), expecting `error`; return
    its message."""
    with pytest.raises(error) as e:
        if atomic:
            with transaction.atomic():
                push()
        else:
            push()
    return str(e.value)


# -- NUL and lone surrogates in names, queues and keys ---------------------------------


@pytest.mark.parametrize("atomic", [False, True], ids=["outside", "in_atomic"])
@pytest.mark.parametrize(("queue", "what"), [
    ("mail\0x", "a NUL character at position 4"),
    ("mail\ud800", "a lone surrogate '\\ud800' at position 4"),
])
def test_a_queue_with_a_nul_or_lone_surrogate_is_refused(store, atomic, queue, what):
    text = refused(ValueError, lambda: jobs.mail.enqueue(["v"], {}, queue=queue),
                   atomic=atomic)
    assert text == f"Job 'tests.mail': queue {queue!r} holds {what}, which no store can keep."
    refused(ValueError, lambda: jobs.mail.new_jobs([(["v"], {})], queue=queue))
    assert nothing_stored(store)


@pytest.mark.parametrize("atomic", [False, True], ids=["outside", "in_atomic"])
def test_a_unique_key_with_a_nul_or_lone_surrogate_is_refused(store, scratch_jobs, atomic):
    scratch_jobs.append("tests.nul_key")

    # "~" is made a lone surrogate by the key function: in the argument, it would be
    # refused as one (test_an_argument_with_a_lone_surrogate_is_refused_naming_it).
    @job("tests.nul_key", unique_key=lambda key: key.replace("~", "\udcff"))
    def nul_key(key: str) -> None: ...

    for given, key, what in (
        ("user:1\0a", "user:1\0a", "a NUL character at position 6"),
        ("user:~", "user:\udcff", "a lone surrogate '\\udcff' at position 5"),
    ):
        text = refused(ValueError, lambda given=given: nul_key.push(given), atomic=atomic)
        assert text == (f"Job 'tests.nul_key': the unique_key {key!r} holds {what}, which "
                        f"no store can keep.")
    assert nothing_stored(store)
    # The two keys that differ only after a NUL are two jobs, not one dropped.
    assert nul_key.push("user:1 a").status == nul_key.push("user:1 b").status == "queued"


def test_a_concurrency_key_with_a_nul_is_refused(store, scratch_jobs):
    scratch_jobs.append("tests.nul_concurrency")

    @job("tests.nul_concurrency", concurrency=1, concurrency_key=lambda key: key)
    def nul_concurrency(key: str) -> None: ...

    text = refused(ValueError, lambda: nul_concurrency.push("k\0"))
    assert "'tests.nul_concurrency'" in text and "the concurrency_key 'k\\x00'" in text
    assert "NUL" in text
    assert nothing_stored(store)


def test_a_name_or_queue_with_a_nul_is_refused_at_definition(scratch_jobs):
    with pytest.raises(ValueError, match=r"job name 'tests.nul\\x00name' holds a NUL"):
        job("tests.nul\0name")(lambda: None)
    with pytest.raises(ValueError, match=r"queue 'mail\\x00' holds a NUL"):
        job("tests.nul_queue", queue="mail\0")(lambda: None)
    with pytest.raises(ValueError, match=r"lone surrogate '\\udc80'"):
        job("tests.\udc80")(lambda: None)
    assert "tests.nul_queue" not in registry


# -- arguments --------------------------------------------------------------------------


def nested(depth: int) -> list:
    value: list = []
    for _ in range(depth):
        value = [value]
    return value


def test_arguments_nested_too_deeply_are_refused_naming_the_argument(store):
    text = refused(InvalidPayload, lambda: jobs.add.push(1, nested(5000)))
    assert text.startswith("Job 'tests.add': positional argument 1 (list) is nested too "
                           "deeply to be stored as JSON"), text
    text = refused(InvalidPayload, lambda: jobs.record.push(value={"a": nested(5000)}))
    assert text.startswith("Job 'tests.record': argument 'value' (dict) is nested too deeply")
    assert nothing_stored(store)
    assert jobs.add.push(1, nested(100)).status == "queued"


def test_an_argument_with_a_lone_surrogate_is_refused_naming_it(store):
    text = refused(InvalidPayload, lambda: jobs.add.push("ok \u00e9", ["x", "bad \ud83d"]))
    assert text.startswith("Job 'tests.add': positional argument 1 (list: ['x', 'bad "
                           "\\ud83d']) holds a lone surrogate '\\ud83d'"), text
    text = refused(InvalidPayload, lambda: jobs.record.push(value={"\udc00": 1}))
    assert "argument 'value'" in text and "lone surrogate '\\udc00'" in text
    assert nothing_stored(store)
    # A NUL is JSON's \u0000, and an emoji is UTF-8: both stored and read back.
    assert jobs.record.push("nul\0 \U0001f600 \u00e9").status == "queued"
    assert Job.objects.count() == 1 if store.transactional_push else True


# -- delays and moments -----------------------------------------------------------------


@pytest.mark.parametrize("delay", [math.nan, math.inf, -math.inf, -1, 10**12,
                                   timedelta(days=-1), timedelta(days=4000)])
def test_push_in_with_a_delay_out_of_range_is_refused(store, delay):
    text = refused(ValueError, lambda: jobs.record.push_in(delay, "v"))
    assert text == (f"Job 'tests.record': push_in needs a delay of 0 to 315360000 s "
                    f"(10 years), got {delay!r}."), text
    assert nothing_stored(store)


def test_push_in_with_a_delay_that_is_not_a_number_is_refused(store):
    for delay in ("5", None, True):
        text = refused(TypeError, lambda delay=delay: jobs.record.push_in(delay, "v"))
        assert text == (f"Job 'tests.record': push_in needs seconds (a number) or a "
                        f"timedelta, got {delay!r}."), text
    assert nothing_stored(store)


@pytest.mark.parametrize("when", [
    datetime(9999, 12, 31, 23, 59, tzinfo=UTC),
    datetime(1, 1, 1, tzinfo=UTC),
])
def test_push_at_a_moment_out_of_range_is_refused(store, when):
    text = refused(ValueError, lambda: jobs.record.push_at(when, "v"))
    assert text.startswith(f"Job 'tests.record': push_at needs a moment within 10 years of "
                           f"now, got {when!r}"), text
    refused(ValueError, lambda: jobs.record.enqueue(["v"], {}, at=when))
    assert nothing_stored(store)


def test_delays_and_moments_in_range_are_stored(store):
    for push in (lambda: jobs.record.push_in(0, "v"), lambda: jobs.record.push_in(3600.5, "v"),
                 lambda: jobs.record.push_in(timedelta(days=3650), "v"),
                 lambda: jobs.record.push_at(timezone.now() - timedelta(days=3000), "v")):
        assert push().status == "queued"


# -- priority ---------------------------------------------------------------------------


@pytest.mark.parametrize("atomic", [False, True], ids=["outside", "in_atomic"])
def test_a_priority_outside_the_column_is_refused_at_the_push(store, atomic):
    for priority in (10**6, PRIORITY_MAX + 1, PRIORITY_MIN - 1):
        text = refused(ValueError, lambda priority=priority: jobs.record.enqueue(
            ["v"], {}, priority=priority), atomic=atomic)
        assert text == (f"Job 'tests.record': priority must be an integer from -32768 to "
                        f"32767, got {priority!r}."), text
    text = refused(TypeError, lambda: jobs.record.enqueue(["v"], {}, priority=1.5))
    assert "priority must be an integer" in text and "1.5" in text
    assert nothing_stored(store)
    for priority in (PRIORITY_MIN, PRIORITY_MAX):
        assert jobs.record.enqueue(["v"], {}, priority=priority).status == "queued"


def test_the_priority_range_is_the_column_type():
    from laterite_django.core import sizes as limits

    assert (limits.PRIORITY_MIN, limits.PRIORITY_MAX) == (PRIORITY_MIN, PRIORITY_MAX)
    assert Job._meta.get_field("priority").get_internal_type() == "SmallIntegerField"


def test_a_priority_outside_the_column_is_refused_at_definition(scratch_jobs):
    with pytest.raises(ValueError, match=r"'tests.high'.*from -32768 to 32767, got 40000"):
        job("tests.high", priority=40000)(lambda: None)
    assert "tests.high" not in registry
