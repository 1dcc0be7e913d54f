"""The queue gauges served by the web app: `laterite_django.metrics.view`."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from .collector import QueueCollector

__all__ = ["metrics_view"]

_registry = CollectorRegistry(auto_describe=False)
_registry.register(QueueCollector())


def metrics_view(request: HttpRequest) -> HttpResponse:
    """The queue gauges now. The job counters are the workers' (`queue_work
    --metrics-port`): a web process has none of its own."""
    return HttpResponse(generate_latest(_registry), content_type=CONTENT_TYPE_LATEST)
