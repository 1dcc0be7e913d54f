"""Changelist filters: by queue (the queues the summary knows), job name, job state, and
the batch a job belongs to (`?batch=ID`, the links of a batch's page)."""

from __future__ import annotations

from django.contrib import admin
from django.contrib.admin.options import IncorrectLookupParameters
from django.db.models import QuerySet
from django.http import HttpRequest

from ..conf import settings
from ..models import Job, JobRecord
from ..registry import registry
from ..stores import get_store
from ..stores.estimates import distinct_names
from ..workflows.actions import batch_jobs_filter
from .states import STATES, state_filter
from .summary import queue_summary

__all__ = ["BatchFilter", "NameFilter", "QueueFilter", "StateFilter"]

# The most names the name filter offers.
NAMES_SHOWN = 500


class _FieldFilter(admin.SimpleListFilter):
    """Filter by the value of the field its `parameter_name` names: the values offered
    (`values`), in order, and the one chosen among them."""

    parameter_name: str  # set by each subclass: the field it filters on

    def values(self, request: HttpRequest, model_admin) -> set[str]:
        """The values to offer."""
        raise NotImplementedError

    def lookups(self, request: HttpRequest, model_admin) -> list[tuple[str, str]]:
        values = self.values(request, model_admin)
        chosen = self.value()
        if chosen:
            values.add(chosen)
        return [(value, value) for value in sorted(values)]

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        if self.value() is None:
            return queryset
        return queryset.filter(**{self.parameter_name: self.value()})


class QueueFilter(_FieldFilter):
    """Filter by queue; the choices come from the summary, so no extra query. The job
    history's list shows no summary: its choices are the queues of its own table,
    read through its queue index (a loose index scan, a few milliseconds over 10^6
    records), where the summary would count every row of the job and failed tables
    (half a second at 10^6 each) for names alone."""

    title = "queue"
    parameter_name = "queue"

    def values(self, request: HttpRequest, model_admin) -> set[str]:
        if model_admin.model is JobRecord:
            return set(distinct_names(settings.DATABASE, JobRecord, NAMES_SHOWN,
                                      column="queue"))
        return set(queue_summary(request).queues)


class NameFilter(_FieldFilter):
    """Filter by job name. On the failed list the choices are the names in its table,
    read through its name index; on the jobs list, the jobs this project registers
    (the job table has no name index: it would cost every push and every claim, and
    reading every row at each page load grows with the queue)."""

    title = "name"
    parameter_name = "name"

    def values(self, request: HttpRequest, model_admin) -> set[str]:
        if model_admin.model is Job:
            return set(registry.names()[:NAMES_SHOWN])
        return set(get_store().job_names(model_admin.model, NAMES_SHOWN))


class StateFilter(admin.SimpleListFilter):
    """Filter queued jobs by state: waiting, delayed, running, running past retry_after."""

    title = "state"
    parameter_name = "state"

    def lookups(self, request: HttpRequest, model_admin) -> list[tuple[str, str]]:
        return [(value, label) for value, (label, _) in STATES.items()]

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        state = self.value()
        if state is None:
            return queryset
        try:
            return queryset.filter(state_filter(state))
        except ValueError as e:
            # The changelist answers this with its "invalid filter" redirect.
            raise IncorrectLookupParameters(e) from e


class BatchFilter(admin.SimpleListFilter):
    """The jobs of one batch (`?batch=ID`), as a batch's page links to them; shown only
    while in use. Anything but a whole number is an invalid filter."""

    title = "batch"
    parameter_name = "batch"

    def lookups(self, request: HttpRequest, model_admin) -> list[tuple[str, str]]:
        # A filter without choices is not applied: offer the one chosen (none otherwise).
        chosen = self.value()
        return [] if chosen is None else [(chosen, f"#{chosen}")]

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        value = self.value()
        if value is None:
            return queryset
        if not (value.isascii() and value.isdigit() and len(value) < 19):
            raise IncorrectLookupParameters(f"{value!r} is not a batch id.")
        return queryset.filter(batch_jobs_filter(int(value)))
