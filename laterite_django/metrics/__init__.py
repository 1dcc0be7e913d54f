"""Prometheus metrics (the `metrics` extra: prometheus-client).

- `tally.Tally`: a worker counts its attempts here, in memory, and hands the counts
  on at most once a second (and when idle or stopping). Needs no prometheus-client.
- `totals.Totals`: the running sums the metrics show, fed by the tallies; owned by
  the process that serves `/metrics` (the supervisor, or the only worker), so a
  worker process recycled by --max-jobs takes none of the counts with it.
- `collector`: turns the totals, and the store's counts read at scrape time, into
  Prometheus families.
- `server.MetricsServer`: `queue_work --metrics-port PORT`.
- `view`: the queue gauges served from the web app (route it in your urls.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from django.http import HttpRequest, HttpResponse

__all__ = ["view"]


def view(request: HttpRequest) -> HttpResponse:
    """The queue gauges (jobs per state, the oldest waiting job's age, paused or not) in
    Prometheus' text format, read from the store now. Route it and protect it as you
    would any operator's page: `path("metrics", laterite_django.metrics.view)`."""
    from .view import metrics_view  # optional dependency: prometheus-client, which it imports

    return metrics_view(request)
