"""The job history in the admin: finished jobs (JobRecord), filtered by name, queue,
status and when they finished, and each one's timeline. Read-only: records go when
their keep is past (LATERITE_QUEUE_HISTORY), never by hand.

Encrypted arguments show as stored ("[encrypted]"), decrypted on demand for a user with
`laterite_django.view_job_arguments`, each view logged, as on a job's page.
"""

from __future__ import annotations

import json
from typing import Any

from django.contrib import admin
from django.http import HttpRequest
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString
from django.utils.text import Truncator

from ..models import JobRecord
from .arguments import DecryptedArguments
from .base import ReadOnlyQueueAdmin
from .console import console_filter
from .display import breakable, moment, preformatted
from .filters import NameFilter, QueueFilter

__all__ = ["JobRecordAdmin"]


def seconds(value: float | None) -> str:
    """A duration as the pages show it: 0.042 s, 12.3 s, 4 min 3 s."""
    if value is None:
        return "-"
    if value < 60:
        return f"{value:.3f} s" if value < 10 else f"{value:.1f} s"
    minutes, rest = divmod(int(value), 60)
    return f"{minutes} min {rest} s"


def _step(label: str, when: Any, note: str = "") -> SafeString:
    """A line of the timeline that is not an attempt: pushed, a gap, the end."""
    return format_html('<tr><th scope="row">{}</th><td>{}</td><td colspan="4">{}</td></tr>',
                       label, when, note)


class JobRecordAdmin(DecryptedArguments, ReadOnlyQueueAdmin):
    """Finished jobs, newest first: how each ended, where, after how many tries."""

    list_display = ("job_id", "job_name", "queue_name", "status", "attempts", "finished",
                    "ran_for", "worker", "error_line")
    list_filter = (NameFilter, QueueFilter, "status", "finished_at", console_filter(
        time_field="finished_at", time_label="finished", time_indexed=True, payload=None,
        error_field="error", order=("-finished_at", "-id")))
    search_fields = ("=job_id",)
    ordering = ("-finished_at", "-id")  # type: ignore[assignment]  # the base says ("-id",)
    list_defer = ("args", "kwargs", "encrypted")
    shows_queue_summary = False
    actions = None
    id_noun = "record"
    change_form_template = "laterite_django/admin/jobrecord_change_form.html"
    fieldsets = (
        (None, {"fields": ("job_id", "name", "queue", "status", "attempts", "worker")}),
        ("Timeline", {"fields": ("timeline",)}),
        ("Error", {"fields": ("traceback",)}),
        ("Arguments", {"fields": ("arguments",)}),
    )
    readonly_fields = ("job_id", "name", "queue", "status", "attempts", "worker", "timeline",
                       "traceback", "arguments")

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # records go when their keep is past

    def get_search_results(self, request, queryset, search_term):
        term = search_term.strip().lstrip("#")
        if not term:
            return queryset, False
        if term.isdigit() and len(term) < 19:  # a job's id
            return queryset.filter(job_id=int(term)), False
        return queryset.none(), False

    @admin.display(description="name", ordering="name")
    def job_name(self, obj: JobRecord) -> SafeString:
        return breakable(obj.name)

    @admin.display(description="queue", ordering="queue")
    def queue_name(self, obj: JobRecord) -> SafeString:
        return breakable(obj.queue)

    @admin.display(description="finished at", ordering="finished_at")
    def finished(self, obj: JobRecord) -> SafeString | str:
        return moment(obj.finished_at)

    @admin.display(description="ran")
    def ran_for(self, obj: JobRecord) -> str:
        return seconds(obj.ran)

    @admin.display(description="error")
    def error_line(self, obj: JobRecord) -> SafeString | str:
        line = obj.error.strip().split("\n", 1)[0]
        if not line:
            return ""
        return format_html('<span title="{}">{}</span>', line, Truncator(line).chars(80))

    @admin.display(description="timeline")
    def timeline(self, obj: JobRecord) -> SafeString:
        """Pushed (and the wait for its first attempt), each attempt on a line of its own
        (its start, end, how long it ran, its worker and error), and how it ended.

        Attempts not in the log (past the first and last it keeps, or a job given back
        unfinished) show as one line; an attempt whose worker died shows no start nor
        end, its error the sweep's reason."""
        attempts = obj.attempt_list
        start = attempts[0]["started"] if attempts else None
        waited = ("" if start is None or obj.pushed_at is None else
                  f"waited {seconds((start - obj.pushed_at).total_seconds())} for its first "
                  f"attempt")
        steps: list[SafeString] = [_step("pushed", moment(obj.pushed_at), note=waited)]
        if not attempts:
            steps.append(_step("never started", "-"))
        previous = 0
        for entry in attempts:
            number = entry["attempt"]
            if isinstance(number, int) and number > previous + 1:
                left = number - previous - 1
                steps.append(_step(f"{left} attempt{'s' if left > 1 else ''} not kept", "-",
                                   note="given back unfinished, or past the first and last "
                                        "attempts a log keeps"))
            if isinstance(number, int):
                previous = number
            started, ended = entry["started"], entry["ended"]
            ran = (seconds((ended - started).total_seconds())
                   if started is not None and ended is not None else "-")
            error = entry["error"].strip().split("\n", 1)[0]
            steps.append(format_html(
                '<tr class="laterite-attempt"><th scope="row">attempt {}</th>'
                '<td>{} \u2192 {}</td><td style="white-space: nowrap">ran {}</td>'
                '<td style="white-space: nowrap">{}</td><td>{}</td></tr>',
                number if number is not None else "?", moment(started), moment(ended), ran,
                entry["worker"] or "-",
                format_html('<span title="{}">{}</span>', entry["error"],
                            Truncator(error).chars(120)) if error else ""))
        ended_as = {"succeeded": "succeeded", "failed": "failed for good",
                    "cancelled": "cancelled"}.get(obj.status, obj.status)
        steps.append(_step(ended_as, moment(obj.finished_at),
                           note=f"ran {seconds(obj.ran)}" if obj.ran is not None else ""))
        return format_html('<table class="laterite-timeline">{}</table>',
                           format_html_join("", "{}", ((step,) for step in steps)))

    @admin.display(description="traceback")
    def traceback(self, obj: JobRecord) -> SafeString | str:
        return preformatted(obj.error) if obj.error else "-"

    @admin.display(description="arguments")
    def arguments(self, obj: JobRecord) -> SafeString:
        """As stored: an encrypted argument as "[encrypted]", its ciphertext not shown."""
        shown = {"args": obj.args, "kwargs": obj.kwargs}
        return preformatted(json.dumps(shown, indent=2, ensure_ascii=False))
