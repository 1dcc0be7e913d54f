"""TEMPORARY diagnostics (to be deleted)."""

from __future__ import annotations

import pytest

from laterite_django import chain
from laterite_django.models import FailedJob
from laterite_django.testing import run_jobs
from tests.testapp.jobs import step
from tests.testapp.models import Record

pytestmark = pytest.mark.django_db(transaction=True)


def test_diag(store, monkeypatch):
    from laterite_django.conf import settings
    from laterite_django.flow import limits
    from laterite_django.registry import registry
    from laterite_django.stores import redis_calls

    print("\nDIAG registry", len(registry), "limited_jobs", limits._limited_jobs,
          "limited_tasks", limits.limited_tasks, "any", limits.any_job_limited())
    print("DIAG settings LIMITS", settings.LIMITS, "QUEUES", settings.QUEUES, "STORE",
          settings.STORE, "PREFIX", settings.PREFIX, "MODE", settings.MODE)
    print("DIAG store", store, store.client, store.client.connection_pool)
    print("DIAG kept", redis_calls._KEPT)
    print("DIAG records", list(Record.objects.values_list("kind", "value")))
    print("DIAG script exists", dict(zip(redis_calls.SHAS, store.client.script_exists(
        *redis_calls.SHAS.values()), strict=True)))
    cls = type(store)
    for name in ("settle_and_claim", "delete", "claim", "push", "flush"):
        real = getattr(cls, name)

        def wrapped(self, *a, _real=real, _name=name, **k):
            out = _real(self, *a, **k)
            print("DIAG call", _name, a, k, "->", out)
            return out

        monkeypatch.setattr(cls, name, wrapped)
    chain(step.call("a"), step.call("b"), step.call("c")).push()
    run_jobs()
    print("DIAG steps", list(Record.objects.values_list("kind", "value")))
    print("DIAG failed", list(FailedJob.objects.values_list("name", "error")))
    print("DIAG counts", store.counts())
    for key in sorted(store.client.scan_iter(f"{store.prefix}:*")):
        kind = store.client.type(key)
        print("DIAG key", key, kind)
    assert list(Record.objects.filter(kind="step").values_list("value", flat=True)) == [
        "a", "b", "c"]
