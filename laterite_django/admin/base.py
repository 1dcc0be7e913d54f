"""What the Job, FailedJob and Batch admins share: read-only pages, the summary, fast lists."""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import Any, TypeVar

from django.contrib import admin, messages
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.contrib.admin.views.main import PAGE_VAR, ChangeList
from django.core.exceptions import PermissionDenied
from django.db.models import Model, QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import SimpleTemplateResponse
from django.urls import NoReverseMatch, reverse
from django.utils.text import capfirst

from ..conf import settings
from ..exceptions import StoreUnavailable
from ..models import FailedJob, Job
from ..stores.errors import database_outage
from .console import WINDOWED
from .paginator import EstimatedCountPaginator
from .summary import queue_summary

__all__ = ["ReadOnlyQueueAdmin", "answers_store_trouble", "store_trouble"]

logger = logging.getLogger("laterite.admin")

V = TypeVar("V", bound=Callable[..., HttpResponse])


def store_trouble(error: BaseException) -> str | None:
    """What to tell the user of an error about reaching the queue's store (down, busy,
    not migrated), naming the store; None for any other error, which propagates."""
    if isinstance(error, StoreUnavailable):
        return str(error)
    outage = database_outage(error, settings.DATABASE, str(settings.STORE))
    return None if outage is None else str(outage)


def answers_store_trouble(view: V) -> V:
    """Wrap an admin view: a store that cannot be reached is said in an error message
    and a redirect (`ReadOnlyQueueAdmin.store_down`), not a server error. A page is
    rendered inside the wrap, as the list's rows are read from the store only then."""

    @functools.wraps(view)
    def guarded(self: Any, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        try:
            response = view(self, request, *args, **kwargs)
            if isinstance(response, SimpleTemplateResponse):
                response.render()
            return response
        except Exception as e:
            said = store_trouble(e)
            if said is None:
                raise
        return self.store_down(request, said)

    return guarded  # type: ignore[return-value]


class ReadOnlyQueueAdmin(admin.ModelAdmin):
    """A list of queue rows under the queue summary; no add or edit form.

    A job is pushed by code, not typed in a form: the pages only show, and the
    actions change jobs through the store. The list stays fast on big tables:
    no full count per page load, no query per row.
    """

    paginator = EstimatedCountPaginator
    show_full_result_count = False  # no COUNT(*) over the whole table per page load
    show_facets = admin.ShowFacets.NEVER
    list_per_page = 100
    ordering = ("-id",)
    change_list_template = "laterite_django/admin/change_list.html"
    # The detail page's buttons (Retry, Run now) above the fields as well as below.
    save_on_top = True
    # Actions whose POST without the permission is answered 403, not ignored.
    guarded_actions: tuple[str, ...] = ()

    # Big text columns the list does not show, left out of its query.
    list_defer: tuple[str, ...] = ()
    # Whether the list is shown under the queue summary (every queue's counts).
    shows_queue_summary = True
    # What a ticked row's id names, in the message that refuses one that is no number.
    id_noun = "job"

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        return super().get_queryset(request).using(settings.DATABASE)

    def get_changelist(self, request: HttpRequest, **kwargs):
        defer = self.list_defer

        class QueueChangeList(ChangeList):
            def get_queryset(self, request, exclude_parameters=None):
                return super().get_queryset(request, exclude_parameters).defer(*defer)

            def get_results(self, request):
                super().get_results(request)
                counted = self.paginator.counted_rows
                if counted is not None and not (self.show_all and self.can_show_all):
                    # One page in all: its rows were read with the count, not again.
                    self.result_list = counted
                # Unfiltered, the list's count is the whole table's: say "4 jobs" once
                # (below the list), not "4 results (Show all)" beside the search box.
                if not self.has_active_filters and not self.query:
                    self.full_result_count = self.result_count

        return QueueChangeList

    def get_paginator(self, request: HttpRequest, queryset: QuerySet, per_page: int,
                      orphans: int = 0, allow_empty_first_page: bool = True) -> Any:
        """The paginator; a list a test of each row filters (in its window) reads its
        page with its count, in one query."""
        paginator = super().get_paginator(request, queryset, per_page, orphans,
                                          allow_empty_first_page)
        if getattr(request, WINDOWED, False) and isinstance(paginator,
                                                            EstimatedCountPaginator):
            try:
                paginator.read_with_count(int(request.GET.get(PAGE_VAR, 1)))
            except ValueError:
                paginator.read_with_count(1)
        return paginator

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

    def response_action(self, request: HttpRequest, queryset: QuerySet, *args, **kwargs):
        # A ticked id that is not a whole number (a forged form) is refused by
        # name, not answered with a server error.
        for value in request.POST.getlist(ACTION_CHECKBOX_NAME):
            if not (value.isascii() and value.isdigit()):
                self.message_user(
                    request, f"Nothing changed: {value!r} is not a {self.id_noun} id.",
                    messages.ERROR,
                )
                return HttpResponseRedirect(request.get_full_path())
        # `action_location` (Django 6.1 on) passes through.
        return super().response_action(request, queryset, *args, **kwargs)

    def list_url(self, request: HttpRequest, model: type[Model]) -> str | None:
        """Return the changelist URL of `model`, or None if this user may not see it."""
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

    def pause_url(self, request: HttpRequest) -> str | None:
        """Return the URL that pauses and resumes queues (the Jobs admin's), or None if
        this user may not change jobs."""
        model_admin = self.admin_site._registry.get(Job)
        if model_admin is None or not model_admin.has_change_permission(request):
            return None
        try:
            return reverse(f"{self.admin_site.name}:laterite_django_job_pause")
        except NoReverseMatch:
            return None

    def store_down(self, request: HttpRequest, said: str) -> HttpResponse:
        """Answer a request the store could not serve: after a POST, "Not done" and back
        to this list; after a GET, to the admin's index (the page cannot be shown)."""
        logger.warning("The admin could not reach the store: %s", said,
                       extra={"action": "admin_store_down"})
        index = reverse(f"{self.admin_site.name}:index")
        if request.method == "POST":
            self.message_user(request, f"Not done: {said}", messages.ERROR)
            return HttpResponseRedirect(self.list_url(request, self.model) or index)
        title = capfirst(self.model._meta.verbose_name_plural)
        self.message_user(request, f"{title} cannot be shown: {said}", messages.ERROR)
        return HttpResponseRedirect(index)

    @answers_store_trouble
    def change_view(self, request: HttpRequest, object_id: str, form_url: str = "",
                    extra_context: dict | None = None) -> HttpResponse:
        return super().change_view(request, object_id, form_url, extra_context)

    @answers_store_trouble
    def delete_view(self, request: HttpRequest, object_id: str,
                    extra_context: dict | None = None) -> HttpResponse:
        return super().delete_view(request, object_id, extra_context)

    def object_url(self, view: str, obj: Any) -> str:
        """Return the URL of this admin's `view` (change, retry, ...) for `obj`."""
        opts = self.model._meta
        return reverse(
            f"{self.admin_site.name}:{opts.app_label}_{opts.model_name}_{view}", args=[obj.pk]
        )

    def render_change_form(self, request, context, add=False, change=False, form_url="",
                           obj=None):
        if obj is not None and getattr(obj, "retried_from_id", None) is not None:
            # The failed row it came from left the failed list at the retry: its id
            # and error are all that is kept.
            context["retried_from"] = (
                f"Retried from failed job #{obj.retried_from_id}: {obj.retried_from_error}"
            )
        return super().render_change_form(request, context, add, change, form_url, obj)

    @answers_store_trouble
    def changelist_view(self, request: HttpRequest, extra_context: dict | None = None):
        if request.method == "POST":
            allowed = self.get_actions(request)
            for name in request.POST.getlist("action"):
                if name in self.guarded_actions and name not in allowed:
                    raise PermissionDenied(f"You may not run the action {name!r}.")
        if not self.shows_queue_summary:
            return super().changelist_view(request, extra_context={
                "title": capfirst(self.model._meta.verbose_name_plural), **(extra_context or {})})
        summary = queue_summary(request)
        context = {
            "title": capfirst(self.model._meta.verbose_name_plural),
            "queue_summary": summary,
            "summary_job_url": self.list_url(request, Job),
            "summary_failed_url": self.list_url(request, FailedJob),
            "summary_shows_pause": True,
            "summary_pause_url": self.pause_url(request),
            "summary_store_note": (
                "" if summary.store == "database" or self.model is not Job else
                # The list reads the database's job table: after a switch from the
                # database store it holds the jobs left there (laterite.W003).
                f"Jobs wait in {summary.store.capitalize()} with this store: the summary "
                f"counts them and the first list below shows them. The second list shows "
                f"the jobs left in the database by the "
                f"database store, which no worker of the {summary.store.capitalize()} store "
                f"runs (`manage.py check --database {settings.DATABASE}` says how to run "
                f"them out)."
            ),
            **(extra_context or {}),
        }
        return super().changelist_view(request, extra_context=context)
