"""The admin's list of workers (Background jobs > Workers): every worker process that
runs or ran lately, read from the store at each load (the Redis store keeps them in
Redis), the same list as `queue_workers`. Read-only: a worker is started and stopped
by its host, not from here."""

from __future__ import annotations

import logging
from typing import Any

from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import reverse

from ..conf import settings
from ..core.workers import WorkerInfo
from ..stores import get_store

__all__ = ["WorkerAdmin", "worker_counts"]

logger = logging.getLogger("laterite")


def worker_counts(workers: list[WorkerInfo]) -> tuple[int, int]:
    """(alive, lost) among `workers`."""
    lost = sum(w.lost(float(settings.RETRY_AFTER)) for w in workers)
    return len(workers) - lost, lost


class WorkerAdmin(admin.ModelAdmin):
    """Workers: host, pid, version, queues, concurrency, started, last beat, jobs in
    hand, alive or lost."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def change_view(self, request: HttpRequest, object_id: str, form_url: str = "",
                    extra_context: dict | None = None) -> HttpResponse:
        opts = self.model._meta
        return HttpResponseRedirect(
            reverse(f"{self.admin_site.name}:{opts.app_label}_{opts.model_name}_changelist"))

    def changelist_view(self, request: HttpRequest, extra_context: dict | None = None
                        ) -> HttpResponse:
        if not self.has_view_permission(request):
            raise PermissionDenied
        workers: list[WorkerInfo] = []
        error = ""
        try:
            workers = get_store().workers()
        except Exception as e:
            logger.warning("The admin could not read the workers: %s", e,
                           extra={"action": "admin_workers_failed"})
            error = f"The queue store cannot be read: {e}"
        retry_after = float(settings.RETRY_AFTER)
        alive, lost = worker_counts(workers)
        context = {
            **self.admin_site.each_context(request),
            "title": "Workers",
            "subtitle": None,
            "opts": self.model._meta,
            "rows": [(w, w.lost(retry_after)) for w in workers],
            "alive": alive,
            "lost": lost,
            "retry_after": retry_after,
            "beat_every": max(0.2, retry_after / 3),  # the worker's heartbeat's
            "error": error,
            "store": str(settings.STORE),
            **(extra_context or {}),
        }
        request.current_app = self.admin_site.name
        return TemplateResponse(request, "laterite_django/admin/worker_list.html", context)
