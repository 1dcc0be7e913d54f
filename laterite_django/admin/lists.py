"""The two lists: jobs waiting or running (`JobAdmin`) and the failed list (`FailedJobAdmin`)."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import (
    HttpRequest,
    HttpResponse,
    HttpResponseBadRequest,
    HttpResponseNotAllowed,
    HttpResponseRedirect,
    QueryDict,
)
from django.shortcuts import get_object_or_404
from django.urls import path, reverse
from django.utils import timezone
from django.utils.html import format_html
from django.utils.http import url_has_allowed_host_and_scheme, urlencode
from django.utils.safestring import SafeString
from django.utils.text import Truncator

from ..conf import settings
from ..core.checkpoint import Checkpoint
from ..core.progress import Progress
from ..core.sequences import HELD_AT
from ..models import FailedJob, Job
from ..stores import get_store
from ..stores.database.workflows import delete_jobs
from .actions import (
    cancel_selected,
    delete_jobs_selected,
    forget,
    forget_selected,
    make_due,
    release_sequences,
    release_sequences_selected,
    report_retried,
    retry,
    retry_selected,
    run_now,
)
from .arguments import DecryptedArguments
from .base import ReadOnlyQueueAdmin, answers_store_trouble
from .console import console_filter
from .display import breakable, moment, preformatted, pretty_json, progress_bar
from .filters import BatchFilter, NameFilter, QueueFilter, StateFilter
from .search import searched_by
from .states import STATES, state_of
from .store_jobs import PAGE_PARAMETER, store_jobs

__all__ = ["FailedJobAdmin", "JobAdmin"]


class _JobColumns(DecryptedArguments):
    """The columns both lists show alike, and the view of encrypted arguments."""

    @admin.display(description="name", ordering="name")
    def job_name(self, obj: Job | FailedJob) -> SafeString:
        return breakable(obj.name)

    @admin.display(description="queue", ordering="queue")
    def queue_name(self, obj: Job | FailedJob) -> SafeString:
        return breakable(obj.queue)

    @admin.display(description="payload")
    def payload_json(self, obj: Job | FailedJob) -> SafeString:
        return pretty_json(obj.payload)


class JobAdmin(_JobColumns, ReadOnlyQueueAdmin):
    """Jobs waiting or running: their state, and making them due now."""

    # Fits a 1400 px window with the navigation sidebar open: who claimed a job shows
    # in its state cell; when it was pushed, on its page.
    list_display = ("id", "job_name", "queue_name", "state", "attempts", "due_at")
    # The search form last: its window holds the rows the other filters keep. The job
    # table has no index on pushed_at: the time range is a test of each row too.
    list_filter = (QueueFilter, NameFilter, StateFilter, BatchFilter, console_filter(
        time_field="pushed_at", time_label="pushed", time_indexed=False, payload="payload",
        error_field=None, order=("-id",)))
    search_fields = searched_by(Job, "name", "payload")
    list_defer = ("payload", "last_error", "checkpoint")
    actions = (run_now, cancel_selected, delete_jobs_selected)
    guarded_actions = ("run_now", "cancel_selected", "delete_jobs_selected", "delete_selected")
    change_form_template = "laterite_django/admin/job_change_form.html"
    fieldsets = (
        (None, {"fields": ("id", "name", "queue", "state", "attempts", "priority")}),
        ("When", {"fields": ("pushed", "due_at", "retry_until_at")}),
        ("Claim", {"fields": ("claimed_by", "claimed", "token", "progress_said")}),
        ("Checkpoint", {"fields": ("checkpoint_said",)}),
        ("Arguments", {"fields": ("payload_json", "unique_key")}),
        ("Last error", {"fields": ("last_error_text",)}),
    )
    readonly_fields = (
        "id", "name", "queue", "state", "attempts", "priority", "pushed", "due_at",
        "retry_until_at", "claimed_by", "claimed", "token", "payload_json", "unique_key",
        "last_error_text", "progress_said", "checkpoint_said", "debounce_deadline",
    )

    @answers_store_trouble
    def changelist_view(self, request: HttpRequest, extra_context: dict | None = None):
        """The list; on the Redis store, the jobs in Redis above it (store_jobs.py)."""
        listed = store_jobs(request, get_store()) if request.method == "GET" else None
        if PAGE_PARAMETER in request.GET:
            # Not a filter of the job table's list (which would refuse it).
            kept = QueryDict(mutable=True)
            for key, values in request.GET.lists():
                if key != PAGE_PARAMETER:
                    kept.setlist(key, values)
            request.GET = kept  # type: ignore[assignment]
        return super().changelist_view(
            request, extra_context={"store_jobs": listed, **(extra_context or {})})

    def get_fieldsets(self, request: HttpRequest, obj: Job | None = None) -> Any:
        """The fieldsets, with the debounce deadline among the times of a debounced job."""
        if obj is None or obj.debounce_until is None:
            return self.fieldsets
        return tuple(
            (name, {"fields": (*options["fields"], "debounce_deadline")})
            if name == "When" else (name, options)
            for name, options in self.fieldsets
        )

    def get_actions(self, request: HttpRequest, action_location: Any = None):
        # `action_location` exists from Django 6.1 on (see FailedJobAdmin.get_actions).
        if action_location is None:
            actions = super().get_actions(request)
        else:
            actions = super().get_actions(request, action_location=action_location)  # type: ignore[call-arg]
        # Deleting is delete_jobs_selected: in chunks, confirmed with the count.
        actions.pop("delete_selected", None)
        return actions

    def delete_model(self, request: HttpRequest, obj: Job) -> None:
        self.delete_queryset(request, Job.objects.using(obj._state.db).filter(pk=obj.pk))

    def delete_queryset(self, request: HttpRequest, queryset) -> None:
        """Delete the jobs; those of a batch count as failed on it, as queue_clear's do,
        so the batch still ends."""
        ids = list(queryset.order_by().values_list("pk", flat=True))
        delete_jobs(queryset.db, ids, get_store().push)

    @admin.display(description="state")
    def state(self, obj: Job) -> SafeString:
        value = state_of(obj, timezone.now())
        label, meaning = STATES[value]
        pill = format_html(
            '<span class="laterite-state laterite-state-{}" title="{}">{}</span>',
            value, meaning, label,
        )
        if not obj.claimed_by or obj.token is None:
            return pill
        return format_html(
            '{}<span class="laterite-claimed-by" title="claimed by">{}</span>{}',
            pill, breakable(obj.claimed_by), progress_bar(obj),
        )

    @admin.display(description="due at", ordering="available_at")
    def due_at(self, obj: Job) -> SafeString | str:
        if obj.token is None and obj.available_at >= HELD_AT:
            return "after the job before it in its sequence"
        return moment(obj.available_at)

    @admin.display(description="pushed at", ordering="pushed_at")
    def pushed(self, obj: Job) -> SafeString | str:
        return moment(obj.pushed_at)

    @admin.display(description="retry until")
    def retry_until_at(self, obj: Job) -> SafeString | str:
        return moment(obj.retry_until)

    @admin.display(description="debounced until")
    def debounce_deadline(self, obj: Job) -> SafeString | str:
        """The latest a debounced push may make it due (its first push plus debounce_max)."""
        return moment(obj.debounce_until)

    @admin.display(description="claimed at")
    def claimed(self, obj: Job) -> SafeString | str:
        return moment(obj.claimed_at)

    @admin.display(description="progress")
    def progress_said(self, obj: Job) -> SafeString | str:
        progress = Progress.parse(obj.progress, obj.token)
        if progress is None:
            return "-"
        return format_html("{}{}", progress_bar(obj), moment(progress.at) if progress.at else "")

    @admin.display(description="saved")
    def checkpoint_said(self, obj: Job) -> SafeString | str:
        """What a long job saved to pick up where it stopped (cx.iterate's place, its
        steps done, its snoozes), in words, then as stored."""
        if not obj.checkpoint:
            return "-"
        try:
            said = Checkpoint.parse(obj.checkpoint).describe()
        except ValueError as e:
            said = str(e)
        return format_html("{}{}", said, pretty_json(obj.checkpoint))

    @admin.display(description="last error")
    def last_error_text(self, obj: Job) -> SafeString | str:
        return preformatted(obj.last_error) if obj.last_error else "-"

    def get_urls(self):
        opts = self.model._meta
        return [
            path(
                "<path:object_id>/run-now/",
                self.admin_site.admin_view(self.run_now_view),
                name=f"{opts.app_label}_{opts.model_name}_run_now",
            ),
            path(
                "pause/",
                self.admin_site.admin_view(self.pause_view),
                name=f"{opts.app_label}_{opts.model_name}_pause",
            ),
            *super().get_urls(),
        ]

    @answers_store_trouble
    def pause_view(self, request: HttpRequest) -> HttpResponse:
        """Pause or resume one queue (the summary's buttons); needs the change permission."""
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        if not self.has_change_permission(request):
            raise PermissionDenied("Pausing a queue needs the change permission on jobs.")
        queue, do = request.POST.get("queue", ""), request.POST.get("do")
        if not queue or do not in ("pause", "resume"):
            return HttpResponseBadRequest("Name a queue, and pause or resume.")
        store = get_store()
        if do == "pause":
            store.pause([queue])
            self.message_user(request, f"Queue {queue!r} paused: workers stop claiming its "
                              f"jobs within {settings.POLL:g} s.", messages.SUCCESS)
        else:
            store.resume([queue])
            self.message_user(request, f"Queue {queue!r} resumed.", messages.SUCCESS)
        back = request.POST.get("next") or request.META.get("HTTP_REFERER") or ""
        if not url_has_allowed_host_and_scheme(back, allowed_hosts={request.get_host()}):
            back = ""
        return HttpResponseRedirect(back or reverse(
            f"{self.admin_site.name}:{self.model._meta.app_label}_"
            f"{self.model._meta.model_name}_changelist"))

    @answers_store_trouble
    def run_now_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        """Make one waiting or delayed job due now (the detail page's button)."""
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        if not self.has_change_permission(request):
            raise PermissionDenied("Running a job now needs the change permission on jobs.")
        job = get_object_or_404(self.get_queryset(request), pk=object_id)
        if make_due([job.pk]):
            self.message_user(request, f"Job #{job.pk} is due now.", messages.SUCCESS)
        else:
            self.message_user(
                request, f"Job #{job.pk} is running; it was left as it is.", messages.WARNING
            )
        return HttpResponseRedirect(self.object_url("change", job))

    def render_change_form(self, request, context, add=False, change=False, form_url="",
                           obj=None):
        if obj is not None:
            context["can_run_now"] = self.has_change_permission(request) and obj.token is None
            context["run_now_url"] = self.object_url("run_now", obj)
        return super().render_change_form(request, context, add, change, form_url, obj)


class FailedJobAdmin(_JobColumns, ReadOnlyQueueAdmin):
    """The failed list: why each job failed, and putting it back on its queue."""

    list_display = ("id", "job_name", "queue_name", "attempts", "failed", "error_line")
    list_filter = (QueueFilter, NameFilter, "failed_at", BatchFilter, console_filter(
        time_field="failed_at", time_label="failed", time_indexed=True, payload="payload",
        error_field="error", order=("-failed_at", "-id")))
    search_fields = searched_by(FailedJob, "name", "error")
    list_defer = ("payload",)
    actions = (retry_selected, forget_selected, release_sequences_selected)
    guarded_actions = ("retry_selected", "forget_selected", "release_sequences_selected",
                       "delete_selected")
    change_form_template = "laterite_django/admin/failedjob_change_form.html"
    fieldsets = (
        (None, {"fields": ("id", "name", "queue", "attempts", "priority", "job_id")}),
        ("When", {"fields": ("pushed", "failed")}),
        ("Error", {"fields": ("traceback",)}),
        ("Arguments", {"fields": ("payload_json", "unique_key")}),
    )
    readonly_fields = (
        "id", "name", "queue", "attempts", "priority", "job_id", "pushed", "failed",
        "traceback", "payload_json", "unique_key",
    )

    @admin.display(description="pushed at")
    def pushed(self, obj: FailedJob) -> SafeString | str:
        return moment(obj.pushed_at)

    @admin.display(description="failed at", ordering="failed_at")
    def failed(self, obj: FailedJob) -> SafeString | str:
        return moment(obj.failed_at)

    @admin.display(description="error")
    def error_line(self, obj: FailedJob) -> SafeString:
        line = obj.error_summary
        return format_html('<span title="{}">{}</span>', line, Truncator(line).chars(120))

    @admin.display(description="traceback")
    def traceback(self, obj: FailedJob) -> SafeString:
        return format_html("<pre>{}</pre>", obj.error)

    def get_actions(self, request: HttpRequest, action_location: Any = None):
        # `action_location` exists from Django 6.1 on (actions on the change form); mypy
        # checks against Django 5.2's signature, which lacks it.
        if action_location is None:
            actions = super().get_actions(request)
        else:
            actions = super().get_actions(request, action_location=action_location)  # type: ignore[call-arg]
        # Deleting a failed job is "forget", through the store.
        actions.pop("delete_selected", None)
        return actions

    def delete_model(self, request: HttpRequest, obj: FailedJob) -> None:
        forget([obj.pk])

    def delete_queryset(self, request: HttpRequest, queryset) -> None:
        forget(list(queryset.order_by().values_list("pk", flat=True)))

    def get_urls(self):
        opts = self.model._meta
        return [
            path(
                "<path:object_id>/retry/",
                self.admin_site.admin_view(self.retry_view),
                name=f"{opts.app_label}_{opts.model_name}_retry",
            ),
            path(
                "<path:object_id>/release_sequence/",
                self.admin_site.admin_view(self.release_sequence_view),
                name=f"{opts.app_label}_{opts.model_name}_release_sequence",
            ),
            *super().get_urls(),
        ]

    @answers_store_trouble
    def release_sequence_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        """Let the sequence this failed job holds go on (the overview's button)."""
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        if not self.has_change_permission(request):
            raise PermissionDenied("Releasing a sequence needs the change permission on "
                                   "failed jobs.")
        failed = get_object_or_404(self.get_queryset(request), pk=object_id)
        if release_sequences([(failed.job_id, failed.payload)]):
            self.message_user(request, f"The sequence held by failed job #{failed.pk} goes on.",
                              messages.SUCCESS)
        else:
            self.message_user(request, f"Failed job #{failed.pk} holds no sequence.",
                              messages.WARNING)
        back = request.POST.get("next", "")
        if back and url_has_allowed_host_and_scheme(back, {request.get_host()},
                                                    request.is_secure()):
            return HttpResponseRedirect(back)
        return HttpResponseRedirect(self.list_url(request, FailedJob) or "../../")

    @answers_store_trouble
    def retry_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        """Put one failed job back on its queue (the detail page's Retry button)."""
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        if not self.has_change_permission(request):
            raise PermissionDenied("Retrying needs the change permission on failed jobs.")
        failed = get_object_or_404(self.get_queryset(request), pk=object_id)
        report_retried(self, request, retry([failed.pk]))
        # Show it waiting on its queue, where the user may look.
        job_list = self.list_url(request, Job)
        if job_list:
            return HttpResponseRedirect(f"{job_list}?{urlencode({'queue': failed.queue})}")
        return HttpResponseRedirect(self.list_url(request, FailedJob) or "../../")

    def render_change_form(self, request, context, add=False, change=False, form_url="",
                           obj=None):
        if obj is not None:
            context["can_retry"] = self.has_change_permission(request)
            context["retry_url"] = self.object_url("retry", obj)
        return super().render_change_form(request, context, add, change, form_url, obj)
