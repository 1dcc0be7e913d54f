"""The admin's actions, each through the store: *Run now*, *Retry* and *Forget*.

They call the same store operations as the commands (`make_due`, `retry`,
`forget`), so they act on the configured store whichever it is, and a job
made due wakes the workers waiting on its queue.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from django.contrib import admin, messages
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.db.models import QuerySet
from django.http import HttpRequest
from django.template.response import TemplateResponse
from django.utils.translation import ngettext

from ..core.cancel import Outcome
from ..core.sequences import sequence_of
from ..stores import get_store
from ..stores.database.workflows import delete_jobs

__all__ = [
    "cancel_selected", "confirmation", "delete_jobs_selected",
    "forget", "forget_selected", "make_due", "release_sequences", "release_sequences_selected",
    "report_retried", "retry", "retry_selected", "run_now", "selected_ids",
]

# Ids handed to one store call: keeps every statement under the drivers' parameter limits.
CHUNK = 1000


def _chunked(ids: Sequence[int], operation: Callable[[list[int]], int]) -> int:
    """Apply a store operation to `ids` a chunk at a time; return the sum of its counts."""
    return sum(operation(list(ids[i : i + CHUNK])) for i in range(0, len(ids), CHUNK))


def make_due(ids: Sequence[int]) -> int:
    """Make these waiting or delayed jobs due now; return how many were."""
    return _chunked(ids, get_store().make_due)


def retry(ids: Sequence[int]) -> int:
    """Put these failed jobs back on their queues; return how many were."""
    return _chunked(ids, get_store().retry)


def forget(ids: Sequence[int]) -> int:
    """Delete these failed jobs; return how many were."""
    return _chunked(ids, get_store().forget)


def selected_ids(request: HttpRequest, queryset: QuerySet) -> list[int]:
    """Return the ids of the jobs an action was asked for.

    With "select all", every row of the (filtered) list; else the ticked ids as
    sent (the changelist let only whole numbers through), not looked up in the
    table, so they reach the store whichever holds the jobs.
    """
    if request.POST.get("select_across") == "1":
        return list(queryset.order_by().values_list("pk", flat=True))
    return list(dict.fromkeys(int(i) for i in request.POST.getlist(ACTION_CHECKBOX_NAME)))


# The rows a confirmation page names (the others are counted).
SHOWN = 20


def confirmation(modeladmin: admin.ModelAdmin, request: HttpRequest, queryset: QuerySet,
                 action: str, question: str, verb: str, *, always: bool = True
                 ) -> TemplateResponse | None:
    """The page asking to confirm `action` on the rows of `queryset` (every row the
    list's filters keep, with "select all"), stating their count and naming the first
    SHOWN; None once confirmed (the action goes on), or at once for ticked rows unless
    `always`. `question` holds `{count}` and `{rows}` (row or rows)."""
    across = request.POST.get("select_across") == "1"
    if request.POST.get("post") == "yes" or not (always or across):
        return None
    if across:
        count = queryset.count()
        shown = list(queryset.order_by("-pk")[:SHOWN])
    else:  # the ticked rows, as the action will take them
        ids = selected_ids(request, queryset)
        count = len(ids)
        shown = list(queryset.model._default_manager.using(queryset.db)
                     .filter(pk__in=ids[:SHOWN]).order_by("-pk"))
    noun = str(modeladmin.model._meta.verbose_name)
    nouns = str(modeladmin.model._meta.verbose_name_plural)
    return TemplateResponse(request, "laterite_django/admin/bulk_confirmation.html", {
        **modeladmin.admin_site.each_context(request),
        "title": question.format(count=count, rows=noun if count == 1 else nouns),
        "crumb": f"{verb.capitalize()} {nouns}",
        "verb": verb,
        "opts": modeladmin.model._meta,
        "count": count,
        "shown": shown,
        "more": max(count - len(shown), 0),
        "select_across": across,
        # The changelist runs no action without a ticked row, across or not.
        "selected_ids": request.POST.getlist(ACTION_CHECKBOX_NAME),
        "action_name": action,
        "action_checkbox_name": ACTION_CHECKBOX_NAME,
    })


@admin.action(description="Run selected jobs now", permissions=["change"])
def run_now(modeladmin: admin.ModelAdmin, request: HttpRequest, queryset: QuerySet) -> None:
    ids = selected_ids(request, queryset)
    due = make_due(ids)
    modeladmin.message_user(
        request,
        ngettext("%(n)d job due now.", "%(n)d jobs due now.", due) % {"n": due},
        messages.SUCCESS if due else messages.WARNING,
    )
    if len(ids) > due:
        left = len(ids) - due
        modeladmin.message_user(
            request,
            ngettext(
                "%(n)d job was left as it is: it is running or no longer queued.",
                "%(n)d jobs were left as they are: they are running or no longer queued.",
                left,
            ) % {"n": left},
            messages.WARNING,
        )


def report_retried(modeladmin: admin.ModelAdmin, request: HttpRequest, count: int) -> None:
    """Tell the user how many failed jobs went back on their queues."""
    modeladmin.message_user(
        request,
        ngettext("%(n)d job put back on its queue.", "%(n)d jobs put back on their queues.",
                 count) % {"n": count},
        messages.SUCCESS if count else messages.WARNING,
    )


@admin.action(description="Retry selected failed jobs", permissions=["change"])
def retry_selected(
    modeladmin: admin.ModelAdmin, request: HttpRequest, queryset: QuerySet
) -> TemplateResponse | None:
    """Put the failed jobs back on their queues, CHUNK ids per store call; with
    "select all", every one the list's filters keep, once its count is confirmed."""
    asked = confirmation(modeladmin, request, queryset, "retry_selected",
                         "Retry {count} {rows}?", "retry", always=False)
    if asked is not None:
        return asked
    ids = list(queryset.order_by().values_list("pk", flat=True))
    report_retried(modeladmin, request, retry(ids))
    return None


@admin.action(description="Forget selected failed jobs", permissions=["delete"])
def forget_selected(
    modeladmin: admin.ModelAdmin, request: HttpRequest, queryset: QuerySet
) -> TemplateResponse | None:
    if request.POST.get("post") != "yes":
        return TemplateResponse(
            request,
            "laterite_django/admin/forget_confirmation.html",
            {
                **modeladmin.admin_site.each_context(request),
                "title": "Forget these failed jobs?",
                "opts": modeladmin.model._meta,
                "count": queryset.count(),
                "shown": list(queryset[:20]),
                "select_across": request.POST.get("select_across") == "1",
                # The changelist runs no action without a ticked row, across or not.
                "selected_ids": request.POST.getlist(ACTION_CHECKBOX_NAME),
                "action_name": "forget_selected",
                "action_checkbox_name": ACTION_CHECKBOX_NAME,
            },
        )
    count = forget(list(queryset.order_by().values_list("pk", flat=True)))
    modeladmin.message_user(
        request,
        ngettext("%(n)d failed job forgotten.", "%(n)d failed jobs forgotten.", count)
        % {"n": count},
        messages.SUCCESS if count else messages.WARNING,
    )
    return None


def release_sequences(rows: Sequence[tuple[int | None, str]]) -> int:
    """Let go on each sequence held by one of these failed jobs ((job id while queued,
    payload) each); return how many were held."""
    store = get_store()
    held = {h.key: h.job_id for h in store.held_sequences(10_000)}
    keys = {mark.key for job_id, text in rows
            if (mark := sequence_of(text)) is not None and job_id is not None
            and held.get(mark.key) == job_id}
    return sum(store.release_sequence(key) for key in sorted(keys))


@admin.action(description="Let the sequences held by selected failed jobs go on",
              permissions=["change"])
def release_sequences_selected(
    modeladmin: admin.ModelAdmin, request: HttpRequest, queryset: QuerySet
) -> None:
    """A failed head of a sequence (@job(sequence=...)) holds the rest of its key: let
    them run, the failed job staying on the failed list (retried, it runs after them)."""
    count = release_sequences(list(queryset.order_by().values_list("job_id", "payload")))
    modeladmin.message_user(
        request,
        ngettext("%(n)d sequence goes on.", "%(n)d sequences go on.", count) % {"n": count}
        if count else "None of the selected failed jobs holds a sequence.",
        messages.SUCCESS if count else messages.WARNING,
    )


@admin.action(description="Cancel selected jobs", permissions=["change"])
def cancel_selected(
    modeladmin: admin.ModelAdmin, request: HttpRequest, queryset: QuerySet
) -> TemplateResponse | None:
    """Cancel jobs (flow control), with "select all" once their count is confirmed:
    waiting ones go to the failed list, running ones are told and interrupted after a
    grace, finished ones are left alone."""
    asked = confirmation(modeladmin, request, queryset, "cancel_selected",
                         "Cancel {count} {rows}?", "cancel", always=False)
    if asked is not None:
        return asked
    ids = selected_ids(request, queryset)
    outcomes: dict[int, str] = {}
    for start in range(0, len(ids), CHUNK):
        outcomes.update(get_store().cancel(ids[start : start + CHUNK]))
    said = {
        Outcome.CANCELLED: ("%(n)d waiting job cancelled: on the failed list now.",
                            "%(n)d waiting jobs cancelled: on the failed list now."),
        Outcome.ASKED: ("%(n)d running job told to stop.", "%(n)d running jobs told to stop."),
        Outcome.FINISHED: ("%(n)d job was no longer waiting or running: nothing changed.",
                           "%(n)d jobs were no longer waiting or running: nothing changed."),
    }
    for outcome, (one, many) in said.items():
        n = sum(1 for value in outcomes.values() if value == outcome)
        if n:
            level = messages.WARNING if outcome == Outcome.FINISHED else messages.SUCCESS
            modeladmin.message_user(request, ngettext(one, many, n) % {"n": n}, level)
    return None


@admin.action(description="Delete selected jobs", permissions=["delete"])
def delete_jobs_selected(
    modeladmin: admin.ModelAdmin, request: HttpRequest, queryset: QuerySet
) -> TemplateResponse | None:
    """Delete waiting jobs, once confirmed, CHUNK ids per statement (Django's own delete
    action would gather every row and its relations in memory first): those of a batch
    count as failed on it, as queue_clear's do, so the batch still ends."""
    asked = confirmation(modeladmin, request, queryset, "delete_jobs_selected",
                         "Delete {count} {rows}?", "delete")
    if asked is not None:
        return asked
    ids = selected_ids(request, queryset)
    count = _chunked(ids, lambda chunk: delete_jobs(queryset.db, chunk, get_store().push))
    modeladmin.message_user(
        request, ngettext("%(n)d job deleted.", "%(n)d jobs deleted.", count) % {"n": count},
        messages.SUCCESS if count else messages.WARNING)
    return None
