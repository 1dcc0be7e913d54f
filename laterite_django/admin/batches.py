"""The admin's list of batches (`laterite_django.batch`): their state and progress, a page
with their callbacks and links to their jobs, and *Cancel selected batches*.

A batch's row is in the database for every store, so the list reads it directly; the
listing and the cancel are those of `queue_batches` (workflows/actions.py). Nothing
is added, edited or deleted by hand: a batch is pushed by code.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.contrib.admin.options import IncorrectLookupParameters
from django.db.models import QuerySet
from django.http import HttpRequest
from django.template.response import TemplateResponse
from django.utils.html import format_html
from django.utils.http import urlencode
from django.utils.safestring import SafeString
from django.utils.translation import ngettext

from ..conf import settings
from ..models import Batch, FailedJob, Job
from ..workflows import actions as batch_actions
from .base import ReadOnlyQueueAdmin
from .display import breakable, fraction_bar, moment
from .search import searched_by

__all__ = ["BatchAdmin", "BatchStateFilter", "cancel_batches"]

# The batches a confirmation page names (the others are counted).
SHOWN = 20
# Why a cancelled batch shows no count of jobs succeeded.
UNCOUNTED = ("Not known for a cancelled batch: the jobs its cancel removed are counted as "
             "ended, with those that succeeded.")


class BatchStateFilter(admin.SimpleListFilter):
    """Filter batches by state: running, finished, failed, cancelled."""

    title = "state"
    parameter_name = "state"

    def lookups(self, request: HttpRequest, model_admin) -> list[tuple[str, str]]:
        return [(state, state) for state in batch_actions.STATES]

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        state = self.value()
        if state is None:
            return queryset
        try:
            return queryset.filter(batch_actions.state_filter(state))
        except ValueError as e:
            raise IncorrectLookupParameters(e) from e


def _progress(row: Batch) -> SafeString:
    """How many of its jobs ended, as a bar (the Jobs list's progress bar) and words."""
    ended = row.total - row.pending
    said = f"{ended} of {row.total} ended"
    fraction = ended / row.total if row.total else (1.0 if row.finished_at else None)
    return fraction_bar(fraction, said)


@admin.action(description="Cancel selected batches", permissions=["change"])
def cancel_batches(
    modeladmin: admin.ModelAdmin, request: HttpRequest, queryset: QuerySet
) -> TemplateResponse | None:
    """Cancel batches, once confirmed: their jobs not started are removed (one claimed
    meanwhile is dropped unrun by its worker), `then` and `catch` are never pushed."""
    if request.POST.get("post") != "yes":
        count = queryset.count()
        rows = list(queryset.order_by("-created_at", "-id")[:SHOWN])
        return TemplateResponse(request, "laterite_django/admin/batch_cancel_confirmation.html", {
            **modeladmin.admin_site.each_context(request),
            "title": "Cancel these batches?",
            "opts": modeladmin.model._meta,
            "count": count,
            "shown": [(row, _progress(row)) for row in rows],
            "more": max(count - len(rows), 0),
            "select_across": request.POST.get("select_across") == "1",
            "selected_ids": request.POST.getlist(ACTION_CHECKBOX_NAME),
            "action_name": "cancel_batches",
            "action_checkbox_name": ACTION_CHECKBOX_NAME,
        })
    ids = list(queryset.order_by().values_list("pk", flat=True))
    done = [batch_actions.cancel(batch_id) for batch_id in ids]
    cancelled = [d for d in done if d.outcome == batch_actions.CANCELLED]
    removed = sum(d.removed for d in cancelled)
    if cancelled:
        modeladmin.message_user(request, ngettext(
            "%(n)d batch cancelled: %(r)d waiting jobs removed now.",
            "%(n)d batches cancelled: %(r)d waiting jobs removed now.", len(cancelled),
        ) % {"n": len(cancelled), "r": removed}, messages.SUCCESS)
    left = len(done) - len(cancelled)
    if left:
        modeladmin.message_user(request, ngettext(
            "%(n)d batch had finished or was cancelled already: nothing changed.",
            "%(n)d batches had finished or were cancelled already: nothing changed.", left,
        ) % {"n": left}, messages.WARNING)
    return None


class BatchAdmin(ReadOnlyQueueAdmin):
    """Batches, newest first: state, progress, counts; cancel what has not run."""

    # Fits a 1400 px window with the navigation sidebar open: the progress bar shows
    # under the state (as a running job's does in the Jobs list), each date on two lines.
    list_display = ("id", "batch_name", "state_and_progress", "total", "succeeded",
                    "failed_count", "pending", "created_on", "finished_on")
    list_display_links = ("id", "batch_name")
    list_filter = (BatchStateFilter,)
    search_fields = searched_by(Batch, "name")
    ordering = ("-created_at",)  # newest first, as queue_batches (the list adds -pk for ties)
    list_defer = ("then_call", "catch_call", "finally_call")
    actions = (cancel_batches,)
    guarded_actions = ("cancel_batches", "delete_selected")
    shows_queue_summary = False
    id_noun = "batch"
    save_on_top = False
    change_form_template = "laterite_django/admin/batch_change_form.html"
    fieldsets = (
        (None, {"fields": ("id", "name", "state_pill", "progress", "allow_failures")}),
        ("Counts", {"fields": ("total", "succeeded", "failed_count", "pending")}),
        ("When", {"fields": ("created", "caught", "finished", "cancelled")}),
        ("Callbacks", {"fields": ("then", "catch", "finally_")}),
    )
    readonly_fields = (
        "id", "name", "state_pill", "progress", "allow_failures", "total", "succeeded",
        "failed_count", "pending", "created", "caught", "finished", "cancelled", "then",
        "catch", "finally_",
    )

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # a batch is cancelled, not deleted: its callbacks hang on its row

    @admin.display(description="name", ordering="name")
    def batch_name(self, obj: Batch) -> SafeString | str:
        return breakable(obj.name) if obj.name else "-"

    @admin.display(description="state")
    def state_pill(self, obj: Batch) -> SafeString:
        state = obj.state
        return format_html('<span class="laterite-state laterite-batch-{}" title="{}">{}</span>',
                           state, batch_actions.STATES[state], state)

    @admin.display(description="state")
    def state_and_progress(self, obj: Batch) -> SafeString:
        return format_html("{}{}", self.state_pill(obj), _progress(obj))

    @admin.display(description="progress")
    def progress(self, obj: Batch) -> SafeString:
        return _progress(obj)

    @admin.display(description="succeeded")
    def succeeded(self, obj: Batch) -> SafeString | int:
        count = batch_actions.succeeded(obj)
        return format_html('<span title="{}">-</span>', UNCOUNTED) if count is None else count

    @admin.display(description="failed", ordering="failed")
    def failed_count(self, obj: Batch) -> SafeString | int:
        if not obj.failed:
            return 0
        return format_html('<span class="laterite-failed">{}</span>', obj.failed)

    @admin.display(description="created", ordering="created_at")
    def created(self, obj: Batch) -> SafeString | str:
        return moment(obj.created_at)

    @admin.display(description="finished", ordering="finished_at")
    def finished(self, obj: Batch) -> SafeString | str:
        return moment(obj.finished_at)

    @admin.display(description="created", ordering="created_at")
    def created_on(self, obj: Batch) -> SafeString | str:
        return moment(obj.created_at, stacked=True)

    @admin.display(description="finished", ordering="finished_at")
    def finished_on(self, obj: Batch) -> SafeString | str:
        return moment(obj.finished_at, stacked=True)

    @admin.display(description="catch pushed at")
    def caught(self, obj: Batch) -> SafeString | str:
        return moment(obj.caught_at)

    @admin.display(description="cancelled at")
    def cancelled(self, obj: Batch) -> SafeString | str:
        return moment(obj.cancelled_at)

    def _callback(self, obj: Batch, name: str) -> SafeString | str:
        call = batch_actions.callbacks(obj).get(name)
        return format_html("<code>{}</code>", call) if call else "-"

    @admin.display(description="then")
    def then(self, obj: Batch) -> SafeString | str:
        return self._callback(obj, "then")

    @admin.display(description="catch")
    def catch(self, obj: Batch) -> SafeString | str:
        return self._callback(obj, "catch")

    @admin.display(description="finally")
    def finally_(self, obj: Batch) -> SafeString | str:
        return self._callback(obj, "finally_")

    def job_links(self, request: HttpRequest, obj: Batch) -> tuple[list[tuple[str, str]], str]:
        """Links to the Jobs and Failed jobs lists filtered to this batch (`?batch=ID`),
        those this user may see and that can hold some of its jobs; and a note when
        none can, or when the store keeps its jobs out of the Jobs list."""
        if obj.pending <= 0 and obj.failed <= 0:
            return [], "None of its jobs waits, runs or failed."
        query = urlencode({"batch": obj.pk})
        links, note = [], ""
        jobs_url = self.list_url(request, Job)
        if obj.pending > 0 and settings.STORE != "database":
            note = (f"Its jobs not ended ({obj.pending}) wait in "
                    f"{str(settings.STORE).capitalize()}: the Jobs list does not hold them.")
        elif obj.pending > 0 and jobs_url:
            links.append((f"{jobs_url}?{query}", f"Its jobs not ended ({obj.pending})"))
        failed_url = self.list_url(request, FailedJob)
        if obj.failed > 0 and failed_url:
            links.append((f"{failed_url}?{query}", f"Its failed jobs ({obj.failed})"))
        return links, note

    def render_change_form(self, request, context, add=False, change=False, form_url="",
                           obj=None):
        if obj is not None:
            context["batch_links"], context["batch_note"] = self.job_links(request, obj)
        return super().render_change_form(request, context, add, change, form_url, obj)
