"""The fair key of a push: `@job(fair_key=callable)`, `enqueue(..., fair_key=...)`, a queue
named in LATERITE_QUEUE_FAIRNESS (its jobs without a key sharing one turn), the weights
there; refused values named in the error."""

from __future__ import annotations

import pytest
from django.test import override_settings

from laterite_django import job
from laterite_django.conf import problem
from laterite_django.core.fairness import TURN
from laterite_django.core.values import NewJob
from laterite_django.jobs import JobFunction
from tests.testapp import jobs


@pytest.fixture
def stored(monkeypatch) -> list[NewJob]:
    """The jobs pushes hand to the store (none reaches it)."""
    handed: list[NewJob] = []
    monkeypatch.setattr(JobFunction, "store_jobs",
                        lambda self, new_jobs: handed.extend(new_jobs) or [None])
    return handed


@pytest.fixture
def tenant_job(scratch_jobs):
    scratch_jobs.append("tests.fair_tenant")

    @job("tests.fair_tenant", queue="imports", fair_key=lambda tenant, row: f"tenant:{tenant}")
    def import_row(tenant: int, row: int) -> None: ...

    return import_row


def test_the_jobs_fair_key_names_its_turn(tenant_job):
    (new,) = tenant_job.new_jobs([((7, 1), {})])
    assert (new.fair_key, new.fair_cost) == ("tenant:7", TURN)


@override_settings(LATERITE_QUEUE_FAIRNESS={"imports": {"tenant:7": 2, "default_weight": 0.5}})
def test_weights_come_from_the_setting(tenant_job):
    seven, eight = tenant_job.new_jobs([((7, 1), {}), ((8, 1), {})])
    assert (seven.fair_cost, eight.fair_cost) == (TURN / 2, TURN * 2)


def test_enqueue_takes_a_fair_key_of_its_own(tenant_job, stored):
    tenant_job.enqueue((7, 1), {}, fair_key="tenant:other")
    assert stored[0].fair_key == "tenant:other"


def test_a_job_of_a_queue_not_served_fairly_has_no_turn(stored):
    jobs.record.push("x")
    assert stored[0].fair_cost is None


@override_settings(LATERITE_QUEUE_FAIRNESS={"default": {}})
def test_jobs_without_a_key_of_a_fair_queue_share_one_turn(stored):
    jobs.record.push("x")
    assert (stored[0].fair_key, stored[0].fair_cost) == (None, TURN)


def test_a_fair_key_that_is_not_callable_is_refused(scratch_jobs):
    scratch_jobs.append("tests.fair_bad")
    with pytest.raises(TypeError, match="fair_key must be callable"):
        job("tests.fair_bad", fair_key="tenant")(lambda: None)


def test_a_fair_key_that_is_not_a_str_is_refused(scratch_jobs):
    scratch_jobs.append("tests.fair_int")
    counted = job("tests.fair_int", fair_key=lambda n: n)(lambda n: None)
    with pytest.raises(TypeError, match="the fair key 3 must be a str"):
        counted.new_jobs([((3,), {})])


@pytest.mark.parametrize(("value", "says"), [
    ([], "must be a dict"),
    ({"q": 3}, "the weights of 'q' (3)"),
    ({"q": {"a": 0}}, "the weight of 'a' in queue 'q' (0) must be a number from 0.01 to 10"),
    ({"q": {"a": True}}, "the weight of 'a' in queue 'q' (True)"),
    ({"": {}}, "queue name '' is not"),
])
def test_a_malformed_fairness_setting_is_named(value, says):
    found = problem("FAIRNESS", value)
    assert found is not None and found.code == 50 and says in found.allowed
