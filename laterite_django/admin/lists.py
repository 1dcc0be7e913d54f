"""The Django admin for the queue: what waits, what runs, what failed, and putting it back.

Both pages are read-only (a job is pushed by code, not typed in a form).
Failed jobs are retried and forgotten through the store (`retry`, `forget`),
the same code path as `queue_retry` and `queue_forget`. The changelists stay
fast on big tables: no full count per page load, no query per row.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from django.contrib import admin, messages
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.contrib.admin.views.main import ChangeList
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseNotAllowed, HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import NoReverseMatch, path, reverse
from django.utils import timezone
from django.utils.html import format_html
from django.utils.safestring import SafeString
from django.utils.text import Truncator, capfirst
from django.utils.translation import ngettext

from .admin_filters import NameFilter, QueueFilter, StateFilter
from .admin_paginator import EstimatedCountPaginator
from .admin_state import STATES, state_of
from .admin_summary import queue_summary
from .conf import settings
from .models import FailedJob, Job
from .stores import get_store

__all__ = ["FailedJobAdmin", "JobAdmin", "QueueAdmin"]

# Ids handed to one store call: keeps every statement under the drivers' parameter limits.
CHUNK = 1000


def _chunked(ids: Sequence[int], operation: Callable[[list[int]], int]) -> int:
    """Apply a store operation to `ids` a chunk at a time; return the sum of its counts."""
    return sum(operation(list(ids[i : i + CHUNK])) for i in range(0, len(ids), CHUNK))


def _pre(text: str) -> SafeString:
    return format_html('<pre class="laterite-pre">{}</pre>', text)


def _when(value) -> SafeString | str:
    """Show a moment compactly (the list has many columns), the full timestamp on hover."""
    if value is None:
        return "-"
    local = timezone.localtime(value)
    return format_html(
        '<time datetime="{}" title="{}">{}</time>',
        value.isoformat(), local.isoformat(sep=" ", timespec="milliseconds"),
        local.strftime("%Y-%m-%d %H:%M:%S"),
    )


def _pretty_json(text: str) -> SafeString:
    """Show a payload as indented JSON, or as it is stored if it is not valid JSON."""
    try:
        data = json.loads(text)
    except (TypeError, ValueError) as e:
        return format_html(
            '<p class="errornote">The payload is not valid JSON: {}</p>{}', e, _pre(text)
        )
    return _pre(json.dumps(data, indent=2, ensure_ascii=False, sort_keys=False))


class QueueAdmin(admin.ModelAdmin):
    """What the Job and FailedJob admins share: read-only pages, the summary, fast lists."""

    paginator = EstimatedCountPaginator
    show_full_result_count = False  # no COUNT(*) over the whole table per page load
    show_facets = admin.ShowFacets.NEVER
    list_per_page = 100
    ordering = ("-id",)
    change_list_template = "laterite_django/admin/change_list.html"
    # Actions whose POST without the permission is answered 403, not ignored.
    guarded_actions: tuple[str, ...] = ()

    # Big text columns the list does not show, left out of its query.
    list_defer: tuple[str, ...] = ()

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        return super().get_queryset(request).using(settings.DATABASE)

    def get_changelist(self, request: HttpRequest, **kwargs):
        defer = self.list_defer

        class QueueChangeList(ChangeList):
            def get_queryset(self, request, exclude_parameters=None):
                return super().get_queryset(request, exclude_parameters).defer(*defer)

        return QueueChangeList

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        # No edit form for one job; the model-level permission still gates the actions.
        if obj is not None:
            return False
        return super().has_change_permission(request)

    def get_search_results(self, request, queryset, search_term):
        results, may_have_duplicates = super().get_search_results(request, queryset, search_term)
        term = search_term.strip().lstrip("#")
        if term.isdigit() and len(term) < 19:  # an id fits in a bigint
            results |= queryset.filter(pk=int(term))
        return results, may_have_duplicates

    def _list_url(self, request: HttpRequest, model: type) -> str | None:
        model_admin = self.admin_site._registry.get(model)
        if model_admin is None or not model_admin.has_view_or_change_permission(request):
            return None
        try:
            return reverse(
                f"{self.admin_site.name}:{model._meta.app_label}_{model._meta.model_name}"
                f"_changelist"
            )
        except NoReverseMatch:
            return None

    def changelist_view(self, request: HttpRequest, extra_context: dict | None = None):
        if request.method == "POST":
            allowed = self.get_actions(request)
            for name in request.POST.getlist("action"):
                if name in self.guarded_actions and name not in allowed:
                    raise PermissionDenied(f"You may not run the action {name!r}.")
        summary = queue_summary(request)
        context = {
            "title": capfirst(self.model._meta.verbose_name_plural),
            "queue_summary": summary,
            "summary_job_url": self._list_url(request, Job),
            "summary_failed_url": self._list_url(request, FailedJob),
            "summary_store_note": (
                "" if summary.store == "database" or self.model is not Job else
                f"Jobs wait in {summary.store.capitalize()} with this store: the summary "
                f"counts them, the list below holds none."
            ),
            **(extra_context or {}),
        }
        return super().changelist_view(request, extra_context=context)

    def _object_url(self, view: str, obj: Any) -> str:
        opts = self.model._meta
        return reverse(
            f"{self.admin_site.name}:{opts.app_label}_{opts.model_name}_{view}", args=[obj.pk]
        )


@admin.register(Job)
class JobAdmin(QueueAdmin):
    """Jobs waiting or running: their state, and making them due now."""

    list_display = (
        "id", "name", "queue", "state", "attempts", "due_at", "claimed_by", "pushed",
    )
    list_filter = (QueueFilter, NameFilter, StateFilter)
    search_fields = ("name", "payload")
    list_defer = ("payload", "last_error")
    actions = ("run_now", "delete_selected")
    guarded_actions = ("run_now", "delete_selected")
    change_form_template = "laterite_django/admin/job_change_form.html"
    fieldsets = (
        (None, {"fields": ("id", "name", "queue", "state", "attempts", "priority")}),
        ("When", {"fields": ("pushed_at", "due_at", "retry_until")}),
        ("Claim", {"fields": ("claimed_by", "claimed_at", "token")}),
        ("Arguments", {"fields": ("payload_json", "unique_key")}),
        ("Last error", {"fields": ("last_error_text",)}),
    )
    readonly_fields = (
        "id", "name", "queue", "state", "attempts", "priority", "pushed_at", "due_at",
        "retry_until", "claimed_by", "claimed_at", "token", "payload_json", "unique_key",
        "last_error_text",
    )

    @admin.display(description="state")
    def state(self, obj: Job) -> SafeString:
        value = state_of(obj, timezone.now())
        label, meaning = STATES[value]
        return format_html(
            '<span class="laterite-state laterite-state-{}" title="{}">{}</span>',
            value, meaning, label,
        )

    @admin.display(description="due at", ordering="available_at")
    def due_at(self, obj: Job) -> SafeString | str:
        return _when(obj.available_at)

    @admin.display(description="pushed at", ordering="pushed_at")
    def pushed(self, obj: Job) -> SafeString | str:
        return _when(obj.pushed_at)

    @admin.display(description="payload")
    def payload_json(self, obj: Job) -> SafeString:
        return _pretty_json(obj.payload)

    @admin.display(description="last error")
    def last_error_text(self, obj: Job) -> SafeString | str:
        return _pre(obj.last_error) if obj.last_error else "-"

    @admin.action(description="Run selected jobs now", permissions=["change"])
    def run_now(self, request: HttpRequest, queryset: QuerySet) -> None:
        selected = queryset.count()
        due = queryset.filter(token__isnull=True).update(available_at=timezone.now())
        self.message_user(
            request,
            ngettext("%(n)d job due now.", "%(n)d jobs due now.", due) % {"n": due},
            messages.SUCCESS if due else messages.WARNING,
        )
        if selected > due:
            left = selected - due
            self.message_user(
                request,
                ngettext(
                    "%(n)d job is running and was left as it is.",
                    "%(n)d jobs are running and were left as they are.", left,
                ) % {"n": left},
                messages.WARNING,
            )

    def get_urls(self):
        opts = self.model._meta
        return [
            path(
                "<path:object_id>/run-now/",
                self.admin_site.admin_view(self.run_now_view),
                name=f"{opts.app_label}_{opts.model_name}_run_now",
            ),
            *super().get_urls(),
        ]

    def run_now_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        """Make one waiting or delayed job due now (the detail page's button)."""
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        if not self.has_change_permission(request):
            raise PermissionDenied("Running a job now needs the change permission on jobs.")
        job = get_object_or_404(self.get_queryset(request), pk=object_id)
        due = (
            self.get_queryset(request)
            .filter(pk=job.pk, token__isnull=True)
            .update(available_at=timezone.now())
        )
        if due:
            self.message_user(request, f"Job #{job.pk} is due now.", messages.SUCCESS)
        else:
            self.message_user(
                request, f"Job #{job.pk} is running; it was left as it is.", messages.WARNING
            )
        return HttpResponseRedirect(self._object_url("change", job))

    def render_change_form(self, request, context, add=False, change=False, form_url="",
                           obj=None):
        if obj is not None:
            context["can_run_now"] = self.has_change_permission(request) and obj.token is None
            context["run_now_url"] = self._object_url("run_now", obj)
        return super().render_change_form(request, context, add, change, form_url, obj)


@admin.register(FailedJob)
class FailedJobAdmin(QueueAdmin):
    """The failed list: why each job failed, and putting it back on its queue."""

    list_display = ("id", "name", "queue", "attempts", "failed", "error_line")
    list_filter = (QueueFilter, NameFilter, "failed_at")
    search_fields = ("name", "error")
    list_defer = ("payload",)
    actions = ("retry_selected", "forget_selected")
    guarded_actions = ("retry_selected", "forget_selected", "delete_selected")
    change_form_template = "laterite_django/admin/failedjob_change_form.html"
    fieldsets = (
        (None, {"fields": ("id", "name", "queue", "attempts", "priority", "job_id")}),
        ("When", {"fields": ("pushed_at", "failed_at")}),
        ("Error", {"fields": ("traceback",)}),
        ("Arguments", {"fields": ("payload_json", "unique_key")}),
    )
    readonly_fields = (
        "id", "name", "queue", "attempts", "priority", "job_id", "pushed_at", "failed_at",
        "traceback", "payload_json", "unique_key",
    )

    @admin.display(description="failed at", ordering="failed_at")
    def failed(self, obj: FailedJob) -> SafeString | str:
        return _when(obj.failed_at)

    @admin.display(description="error")
    def error_line(self, obj: FailedJob) -> SafeString:
        line = obj.error_summary
        return format_html('<span title="{}">{}</span>', line, Truncator(line).chars(120))

    @admin.display(description="traceback")
    def traceback(self, obj: FailedJob) -> SafeString:
        return format_html("<pre>{}</pre>", obj.error)

    @admin.display(description="payload")
    def payload_json(self, obj: FailedJob) -> SafeString:
        return _pretty_json(obj.payload)

    # -- one code path with queue_retry / queue_forget -------------------------

    def _retry(self, ids: Sequence[int]) -> int:
        return _chunked(ids, get_store().retry)

    def _forget(self, ids: Sequence[int]) -> int:
        return _chunked(ids, get_store().forget)

    def _retried_message(self, request: HttpRequest, count: int) -> None:
        self.message_user(
            request,
            ngettext("%(n)d job put back on its queue.", "%(n)d jobs put back on their queues.",
                     count) % {"n": count},
            messages.SUCCESS if count else messages.WARNING,
        )

    def get_actions(self, request: HttpRequest, action_location: Any = None):
        # `action_location` exists from Django 6.1 on (actions on the change form).
        if action_location is None:
            actions = super().get_actions(request)
        else:
            actions = super().get_actions(request, action_location=action_location)
        # Deleting a failed job is "forget", through the store.
        actions.pop("delete_selected", None)
        return actions

    @admin.action(description="Retry selected failed jobs", permissions=["change"])
    def retry_selected(self, request: HttpRequest, queryset: QuerySet) -> None:
        ids = list(queryset.order_by().values_list("pk", flat=True))
        self._retried_message(request, self._retry(ids))

    @admin.action(description="Forget selected failed jobs", permissions=["delete"])
    def forget_selected(self, request: HttpRequest, queryset: QuerySet) -> TemplateResponse | None:
        select_across = request.POST.get("select_across") == "1"
        if request.POST.get("post") != "yes":
            return TemplateResponse(
                request,
                "laterite_django/admin/forget_confirmation.html",
                {
                    **self.admin_site.each_context(request),
                    "title": "Forget these failed jobs?",
                    "opts": self.model._meta,
                    "count": queryset.count(),
                    "shown": list(queryset[:20]),
                    "select_across": select_across,
                    # The changelist runs no action without a ticked row, across or not.
                    "selected_ids": request.POST.getlist(ACTION_CHECKBOX_NAME),
                    "action_name": "forget_selected",
                    "action_checkbox_name": ACTION_CHECKBOX_NAME,
                },
            )
        ids = list(queryset.order_by().values_list("pk", flat=True))
        count = self._forget(ids)
        self.message_user(
            request,
            ngettext("%(n)d failed job forgotten.", "%(n)d failed jobs forgotten.", count)
            % {"n": count},
            messages.SUCCESS if count else messages.WARNING,
        )
        return None

    def delete_model(self, request: HttpRequest, obj: FailedJob) -> None:
        self._forget([obj.pk])

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet) -> None:
        self._forget(list(queryset.order_by().values_list("pk", flat=True)))

    def get_urls(self):
        opts = self.model._meta
        return [
            path(
                "<path:object_id>/retry/",
                self.admin_site.admin_view(self.retry_view),
                name=f"{opts.app_label}_{opts.model_name}_retry",
            ),
            *super().get_urls(),
        ]

    def retry_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        """Put one failed job back on its queue (the detail page's Retry button)."""
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        if not self.has_change_permission(request):
            raise PermissionDenied("Retrying needs the change permission on failed jobs.")
        failed = get_object_or_404(self.get_queryset(request), pk=object_id)
        self._retried_message(request, self._retry([failed.pk]))
        # Show it waiting on its queue, where the user may look.
        job_list = self._list_url(request, Job)
        if job_list:
            return HttpResponseRedirect(f"{job_list}?queue={failed.queue}")
        return HttpResponseRedirect(self._list_url(request, FailedJob) or "../../")

    def render_change_form(self, request, context, add=False, change=False, form_url="",
                           obj=None):
        if obj is not None:
            context["can_retry"] = self.has_change_permission(request)
            context["retry_url"] = self._object_url("retry", obj)
        return super().render_change_form(request, context, add, change, form_url, obj)
