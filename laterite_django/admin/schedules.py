"""The admin's list of schedules: read through the store (the Redis store keeps their
state in Redis), with Pause, Resume and Run now behind the change permission.

It is a page of its own, not a model list: the schedules are defined in settings
and code, and the store holds only their state. The same listing and actions as
`queue_schedules` (schedules/actions.py).
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import reverse

from ..exceptions import LateriteConfigurationError, StoreUnavailable
from ..schedules import actions

__all__ = ["ScheduleAdmin"]

ACTIONS = ("pause", "resume", "run")


class ScheduleAdmin(admin.ModelAdmin):
    """Schedules: name, job, rule, zone, next ticks, last tick and job, paused."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def change_view(self, request: HttpRequest, object_id: str, form_url: str = "",
                    extra_context: dict | None = None) -> HttpResponse:
        return HttpResponseRedirect(self._list_url())

    def _list_url(self) -> str:
        opts = self.model._meta
        return reverse(f"{self.admin_site.name}:{opts.app_label}_{opts.model_name}_changelist")

    def changelist_view(self, request: HttpRequest, extra_context: dict | None = None
                        ) -> HttpResponse:
        if not self.has_view_or_change_permission(request):
            raise PermissionDenied
        if request.method == "POST":
            return self._act(request)
        rows, error = [], ""
        try:
            rows = actions.listing()
        except (StoreUnavailable, LateriteConfigurationError) as e:
            error = str(e)
        context = {
            **self.admin_site.each_context(request),
            "title": "Schedules",
            "opts": self.model._meta,
            "rows": rows,
            "error": error,
            "can_change": self.has_change_permission(request),
            **(extra_context or {}),
        }
        return TemplateResponse(request, "laterite_django/admin/schedule_list.html", context)

    def _act(self, request: HttpRequest) -> HttpResponse:
        if not self.has_change_permission(request):
            raise PermissionDenied("Changing a schedule needs the change permission on it.")
        action, name = request.POST.get("action", ""), request.POST.get("name", "")
        if action not in ACTIONS:
            raise PermissionDenied(f"Unknown action {action!r}.")
        try:
            if action == "run":
                fired = actions.run_now(name)
                self.message_user(request, f"Schedule {name!r}: pushed job #{fired.id}.",
                                  messages.SUCCESS)
            else:
                getattr(actions, action)(name)
                self.message_user(request, f"Schedule {name!r} {action}d.", messages.SUCCESS)
        except (StoreUnavailable, LateriteConfigurationError) as e:
            self.message_user(request, str(e), messages.ERROR)
        return HttpResponseRedirect(self._list_url())
