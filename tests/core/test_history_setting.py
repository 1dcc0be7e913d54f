"""LATERITE_QUEUE_HISTORY: its forms, the check that refuses a bad one naming it, and the
same refusal where a store reads it."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.test import override_settings

from laterite_django.core.history import duration, history_problem, policy_of, status_of
from laterite_django.exceptions import LateriteConfigurationError
from laterite_django.stores.recording import history


def test_durations():
    assert duration("90s") == 90 and duration("30m") == 1800
    assert duration("12h") == 43200 and duration("7d") == 604800 and duration(3.5) == 3.5
    for bad in ("7x", "", "-1d", 0, -5, True, None, float("inf"), "1 week"):
        assert duration(bad) is None, bad


def test_policies():
    assert policy_of(None) is None
    every = policy_of({"keep": "7d"})
    assert every is not None and every.records("any") and every.keep_of("x") == 604800
    some = policy_of({"keep": "7d", "queues": {"mail": "1d", "bulk": None}})
    assert some is not None
    assert some.keep_of("mail") == 86400 and not some.records("bulk") and some.records("x")
    assert some.longest == 604800 and some.shorter() == {"mail": 86400}
    only = policy_of({"queues": {"mail": "1d"}})
    assert only is not None and only.records("mail") and not only.records("default")
    assert policy_of({"queues": {"mail": None}}) is None  # records nothing: off
    assert status_of("Cancelled: before it ran") == "cancelled"
    assert status_of("ValueError: Cancelled: no") == "failed"


@pytest.mark.parametrize("value, said", [
    ("7d", "None or a dict"),
    ({"keep": "7x"}, "'keep' is '7x'"),
    ({"kept": "7d"}, "'kept' is not a key"),
    ({"queues": ["mail"]}, "'queues' is ['mail']"),
    ({"queues": {"mail": "soon"}}, "queue 'mail' is 'soon'"),
])
def test_a_bad_value_fails_the_check_and_its_use(value, said):
    assert said in (history_problem(value) or "")
    with override_settings(LATERITE_QUEUE_HISTORY=value):
        with pytest.raises(SystemCheckError) as e:
            call_command("check")
        assert "laterite.E051" in str(e.value) and said in str(e.value)
        with pytest.raises(LateriteConfigurationError, match="LATERITE_QUEUE_HISTORY"):
            history()
