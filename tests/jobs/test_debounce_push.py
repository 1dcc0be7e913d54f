"""Debounce at the job's surface: the options of push, enqueue and @job, checked with
errors naming the bad value; the forms that refuse it; capture and inline mode."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from asgiref.sync import async_to_sync
from django.test import override_settings
from django.utils import timezone

from laterite_django import job
from laterite_django.context import Pushed
from laterite_django.testing import capture_jobs
from tests.testapp import jobs
from tests.testapp.models import Record

KEY = {"debounce": 5, "debounce_key": "product:1"}


# -- @job options, checked at definition ---------------------------------------------


@pytest.mark.parametrize("parameter", ["debounce", "debounce_max", "debounce_key"])
def test_a_function_with_a_parameter_push_keeps_is_refused(parameter, scratch_jobs):
    namespace: dict = {}
    exec(f"def reindex(product_id, {parameter}=None): ...", namespace)
    with pytest.raises(TypeError, match=f"parameter named '{parameter}'"):
        job("tests.deb_param")(namespace["reindex"])


@pytest.mark.parametrize(
    ("options", "error", "message"),
    [
        ({"debounce": 0}, ValueError, "debounce must be more than 0 seconds.*got 0"),
        ({"debounce": -1.5}, ValueError, "got -1.5"),
        ({"debounce": "5"}, TypeError, "debounce must be seconds.*got '5'"),
        ({"debounce": True}, TypeError, "got True"),
        ({"debounce": 5, "debounce_max": 2}, ValueError, r"debounce_max \(2\) must be at least"),
        ({"debounce_max": 60}, ValueError, "go with debounce=S.*debounce_max=60"),
        ({"debounce_key": lambda p: "k"}, ValueError, "go with debounce=S"),
        ({"debounce": 5, "debounce_key": "k"}, TypeError, "debounce_key must be callable"),
        ({"debounce": 5, "debounce_key": lambda p: "k", "unique_key": lambda p: "k"},
         ValueError, "unique_key and debounce"),
        ({"debounce": 5, "debounce_key": lambda p: "k", "schedule": 60}, ValueError,
         "scheduled job cannot debounce"),
    ],
)
def test_bad_job_options_are_refused_at_definition(options, error, message, scratch_jobs):
    with pytest.raises(error, match=message):
        @job("tests.deb_bad", **options)
        def reindex(product_id): ...


def test_good_job_options_are_kept(scratch_jobs):
    scratch_jobs.append("tests.deb_good")

    @job("tests.deb_good", debounce=timedelta(seconds=5), debounce_max=60.5,
         debounce_key=lambda product_id: f"product:{product_id}")
    def reindex(product_id): ...

    assert (reindex.debounce, reindex.debounce_max) == (timedelta(seconds=5), 60.5)


# -- a push's options, checked at the push -------------------------------------------


@pytest.mark.parametrize(
    ("options", "error", "message"),
    [
        ({"debounce": 5}, ValueError, "debounce needs a key"),
        ({"debounce_max": 5, "debounce_key": "k"}, ValueError, "go with debounce=S"),
        ({"debounce_key": "k"}, ValueError, "go with debounce=S"),
        ({**KEY, "debounce": 0}, ValueError, "more than 0 seconds"),
        ({**KEY, "debounce": float("nan")}, ValueError, "got nan"),
        ({**KEY, "debounce": "soon"}, TypeError, "got 'soon'"),
        ({**KEY, "debounce_max": 4}, ValueError, r"debounce_max \(4\) must be at least"),
        ({"debounce": 5, "debounce_key": 7}, TypeError, "debounce_key must be a str, got 7"),
        ({"debounce": 5, "debounce_key": "k" * 256}, ValueError, "debounce_key"),
    ],
)
def test_bad_push_options_are_refused(options, error, message, store):
    with pytest.raises(error, match=message):
        jobs.record.push("x", **options)
    assert store.counts() == {}


def test_a_job_with_a_unique_key_refuses_a_debounced_push(store):
    with pytest.raises(ValueError, match="has a unique_key and is pushed with debounce"):
        jobs.unique.push(1, **KEY)


def test_push_in_and_push_at_refuse_a_debounce(store):
    with pytest.raises(TypeError, match="push_in takes no debounce"):
        jobs.record.push_in(5, "x", **KEY)
    with pytest.raises(TypeError, match="push_at takes no debounce"):
        jobs.record.push_at(timezone.now(), "x", **KEY)
    with pytest.raises(TypeError, match="push_at takes no debounce"):
        jobs.record.enqueue(["x"], {}, at=timezone.now(), **KEY)
    assert store.counts() == {}


def test_chains_and_batches_refuse_a_debounced_job(scratch_jobs):
    scratch_jobs.append("tests.deb_chain")

    @job("tests.deb_chain", debounce=5, debounce_key=lambda p: f"p:{p}")
    def reindex(p): ...

    with pytest.raises(ValueError, match="cannot be part of a chain or a batch"):
        reindex.call(1)
    with pytest.raises(ValueError, match="cannot be part of a chain or a batch"):
        jobs.record.call("x", **KEY)


# -- the forms of a debounced push -----------------------------------------------------


def test_enqueue_takes_the_options(store):
    first = jobs.record.enqueue(["a"], {}, debounce=30, debounce_key="product:2")
    second = jobs.record.enqueue(["b"], {}, debounce=timedelta(seconds=30), debounce_max=60,
                                 debounce_key="product:2")
    assert (first.debounced, second.debounced, second.id) == (False, True, first.id)


def test_a_job_declared_with_debounce_debounces_every_push_in_order(store, scratch_jobs):
    scratch_jobs.append("tests.deb_declared")

    @job("tests.deb_declared", debounce=30, debounce_max=60,
         debounce_key=lambda product_id, note: f"product:{product_id}")
    def reindex(product_id, note): ...

    many = reindex.push_many([(1, "a"), (2, "b"), (1, "c")])
    assert [p.debounced for p in many] == [False, False, True]
    assert many[2].id == many[0].id
    one = reindex.push(2, "d")
    assert (one.id, one.debounced) == (many[1].id, True)
    # The push's own key wins over the job's.
    other = reindex.push(1, "e", debounce_key="elsewhere")
    assert not other.debounced
    assert store.counts()["default"].delayed == 3


def test_apush_takes_the_options(store):
    async def push_twice() -> list[Pushed]:
        return [await jobs.record.apush("a", **KEY), await jobs.record.apush("b", **KEY)]

    first, second = async_to_sync(push_twice)()
    assert (first.debounced, second.debounced, second.id) == (False, True, first.id)
    assert store.counts()["default"].delayed == 1


# -- capture and inline ------------------------------------------------------------------


def test_capture_replaces_the_earlier_push_with_the_key():
    with capture_jobs() as pushed:
        first = jobs.record.push("a", debounce=5, debounce_max=8, debounce_key="product:1")
        jobs.record.push("other", debounce=5, debounce_key="product:2")
        second = jobs.record.push("b", debounce=5, debounce_max=8, debounce_key="product:1")
    assert (first.debounced, second.debounced) == (False, True)
    assert [(p.args, p.unique_key, p.debounced) for p in pushed] == [
        (("b",), "product:1", True), (("other",), "product:2", False)]
    deadline = pushed[0].debounce_until
    assert deadline is not None and pushed[0].at <= deadline


def test_capture_caps_the_due_time_at_the_first_push_plus_max():
    with capture_jobs() as pushed:
        jobs.record.push("a", debounce=5, debounce_max=5, debounce_key="k")
        first_at = pushed[0].at
        jobs.record.push("b", debounce=5, debounce_max=5, debounce_key="k")
    assert pushed[0].at == first_at == pushed[0].debounce_until


@override_settings(LATERITE_QUEUE_MODE="inline")
@pytest.mark.django_db(transaction=True)
def test_inline_mode_runs_a_debounced_push_at_once():
    ran = jobs.record.push("now", **KEY)
    assert (ran.status, ran.result) == ("ran", "now")
    assert json.loads(json.dumps(list(Record.objects.values_list("value", flat=True)))) == [
        "now"]
