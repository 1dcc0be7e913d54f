"""Changelist filters: by queue (the queues the summary knows) and by job state."""

from __future__ import annotations

from django.contrib import admin
from django.contrib.admin.options import IncorrectLookupParameters
from django.db import connections
from django.db.models import QuerySet
from django.http import HttpRequest

from .admin_state import STATES, state_filter
from .admin_summary import queue_summary

__all__ = ["NameFilter", "QueueFilter", "StateFilter", "distinct_names"]


class QueueFilter(admin.SimpleListFilter):
    """Filter by queue; the choices come from the summary, so no extra query."""

    title = "queue"
    parameter_name = "queue"

    def lookups(self, request: HttpRequest, model_admin) -> list[tuple[str, str]]:
        queues = set(queue_summary(request).queues)
        if self.value():
            queues.add(self.value())
        return [(queue, queue) for queue in sorted(queues)]

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        if self.value() is None:
            return queryset
        return queryset.filter(queue=self.value())


def distinct_names(queryset: QuerySet, limit: int = 500) -> list[str]:
    """Return the distinct job names in the queryset's table, walking the name index.

    One query that jumps from name to name through the index (a loose index
    scan), so its cost grows with the number of names, not of rows, where
    `SELECT DISTINCT` would read every row.
    """
    connection = connections[queryset.db]
    quote = connection.ops.quote_name
    table = quote(queryset.model._meta.db_table)
    name = quote("name")
    sql = (
        f"WITH RECURSIVE names(name, n) AS ("
        f"SELECT MIN({name}), 1 FROM {table} "
        f"UNION ALL SELECT (SELECT MIN({name}) FROM {table} WHERE {name} > names.name), n + 1 "
        f"FROM names WHERE names.name IS NOT NULL AND n < %s"
        f") SELECT name FROM names WHERE name IS NOT NULL"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [limit])
        return [row[0] for row in cursor.fetchall()]


class NameFilter(admin.SimpleListFilter):
    """Filter by job name; the choices are the names in the table, read through its index."""

    title = "name"
    parameter_name = "name"

    def lookups(self, request: HttpRequest, model_admin) -> list[tuple[str, str]]:
        names = set(distinct_names(model_admin.get_queryset(request)))
        if self.value():
            names.add(self.value())
        return [(name, name) for name in sorted(names)]

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        if self.value() is None:
            return queryset
        return queryset.filter(name=self.value())


class StateFilter(admin.SimpleListFilter):
    """Filter queued jobs by state: waiting, delayed, running, running past retry_after."""

    title = "state"
    parameter_name = "state"

    def lookups(self, request: HttpRequest, model_admin) -> list[tuple[str, str]]:
        return [(value, label) for value, (label, _) in STATES.items()]

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        if self.value() is None:
            return queryset
        try:
            return queryset.filter(state_filter(self.value()))
        except ValueError as e:
            # The changelist answers this with its "invalid filter" redirect.
            raise IncorrectLookupParameters(e) from e
