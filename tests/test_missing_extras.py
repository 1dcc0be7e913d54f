"""What is said when an optional package is missing: the package and the extra that
brings it (README's Install says how to install an extra), never a `pip install` of a
release that is not published."""

from __future__ import annotations

import sys

import pytest
from django.core.management.base import CommandError
from django.test import override_settings

from laterite_django.exceptions import LateriteConfigurationError
from laterite_django.schedules.ticks import cron_problem
from laterite_django.stores import build_store
from tests.conftest import ROOT

__all__: list[str] = []


def absent(monkeypatch: pytest.MonkeyPatch, *modules: str) -> None:
    """Make `import module` raise ImportError, as if the package were not installed."""
    for module in modules:
        monkeypatch.setitem(sys.modules, module, None)


def test_a_cron_rule_without_cronsim(monkeypatch: pytest.MonkeyPatch):
    absent(monkeypatch, "cronsim")
    assert cron_problem("0 3 * * *") == (
        "cron rules need cronsim (the 'schedules' extra), or use every")


@override_settings(LATERITE_QUEUE_STORE="redis", LATERITE_QUEUE_REDIS="redis")
def test_the_redis_store_without_django_redis(monkeypatch: pytest.MonkeyPatch):
    absent(monkeypatch, "django_redis")
    with pytest.raises(LateriteConfigurationError) as raised:
        build_store("redis").client  # noqa: B018 -- connects
    assert str(raised.value) == (
        "LATERITE_QUEUE_STORE is 'redis' but django-redis is not installed: it needs "
        "django-redis and hiredis (the 'redis' extra).")


def test_metrics_port_without_prometheus_client(monkeypatch: pytest.MonkeyPatch):
    from laterite_django.management.commands.queue_work import serve_metrics

    absent(monkeypatch, "laterite_django.metrics.server", "prometheus_client")
    with pytest.raises(CommandError) as raised:
        serve_metrics(0)
    assert str(raised.value).startswith(
        "--metrics-port needs prometheus-client (the 'metrics' extra): ")


def test_no_message_names_an_unpublished_release():
    found = [f"{path.relative_to(ROOT)}:{n}"
             for path in sorted((ROOT / "laterite_django").rglob("*.py"))
             for n, line in enumerate(path.read_text().splitlines(), 1)
             if "laterite-django[" in line]
    assert found == []
