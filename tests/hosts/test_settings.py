"""The settings of the multi-host shapes: LATERITE_QUEUE_LISTEN_DATABASE (a direct
connection for LISTEN behind a pooler) and LATERITE_QUEUE_REDIS_WAIT (pushes confirmed
by a replica). A bad value fails the checks, naming it, and is refused where read."""

from __future__ import annotations

import re

import pytest
from django.test import override_settings
from django.utils import timezone

from laterite_django.checks import check_settings
from laterite_django.conf import validate_all
from laterite_django.exceptions import LateriteConfigurationError
from laterite_django.stores import NewJob

__all__: list[str] = []


@pytest.mark.parametrize("value", ["nope", 5, ""])
def test_a_bad_listen_database_is_refused(value):
    with override_settings(LATERITE_QUEUE_LISTEN_DATABASE=value):
        errors = [e for e in check_settings() if e.id == "laterite.E040"]
        assert len(errors) == 1
        assert errors[0].msg.startswith(f"LATERITE_QUEUE_LISTEN_DATABASE is {value!r}; "
                                        "it must be None or name a database in DATABASES")
        with pytest.raises(LateriteConfigurationError, match=re.escape(errors[0].msg)):
            validate_all()


def test_no_listen_database_is_fine():
    with override_settings(LATERITE_QUEUE_LISTEN_DATABASE=None):
        assert [e for e in check_settings() if e.id == "laterite.E040"] == []


@pytest.mark.parametrize("value", [0, -1, "1", True, float("nan"), float("inf")])
def test_a_bad_redis_wait_is_refused(value):
    with override_settings(LATERITE_QUEUE_REDIS_WAIT=value):
        errors = [e for e in check_settings() if e.id == "laterite.E041"]
        assert [e.msg for e in errors] == [
            f"LATERITE_QUEUE_REDIS_WAIT is {value!r}; it must be None or seconds > 0 "
            "(how long a push waits for one replica to have it)."]
        with pytest.raises(LateriteConfigurationError, match=re.escape(errors[0].msg)):
            validate_all()


@pytest.mark.parametrize("store_kind", ["redis"], indirect=True)
def test_a_bad_redis_wait_is_refused_at_the_push(store):
    now = timezone.now()
    job = NewJob(name="tests.noop", queue="default", payload='{"args":[],"kwargs":{}}',
                 available_at=now, pushed_at=now)
    with override_settings(LATERITE_QUEUE_REDIS_WAIT=-1), pytest.raises(
            LateriteConfigurationError, match="LATERITE_QUEUE_REDIS_WAIT is -1"):
        store.push([job])
    assert store.counts() == {}
