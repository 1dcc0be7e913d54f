"""A changelist paginator that does not count a whole big table on every page load.

Unfiltered, on PostgreSQL, it reads the planner's row estimate (`pg_class.reltuples`,
kept fresh by autovacuum) instead of running `SELECT COUNT(*)` over every row;
filtered lists, small tables and other databases are counted exactly.
"""

from __future__ import annotations

from django.core.paginator import Paginator
from django.db import connections
from django.db.models import QuerySet
from django.utils.functional import cached_property

__all__ = ["ESTIMATE_ABOVE", "EstimatedCountPaginator", "estimated_rows"]

# Below this many rows an exact count is cheap, and exact numbers read better.
ESTIMATE_ABOVE = 10_000


def estimated_rows(queryset: QuerySet) -> int | None:
    """Return PostgreSQL's estimate of the rows in the queryset's table, or None.

    None when the database is not PostgreSQL or the table was never analyzed.
    """
    connection = connections[queryset.db]
    if connection.vendor != "postgresql":
        return None
    table = connection.ops.quote_name(queryset.model._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute("SELECT reltuples::bigint FROM pg_class WHERE oid = %s::regclass", [table])
        row = cursor.fetchone()
    # PostgreSQL 14+ reports -1 for a table never vacuumed or analyzed.
    if row is None or row[0] is None or row[0] < 0:
        return None
    return int(row[0])


class EstimatedCountPaginator(Paginator):
    """Count rows exactly, except an unfiltered big PostgreSQL table, which is estimated."""

    @cached_property
    def count(self) -> int:
        queryset = self.object_list
        if isinstance(queryset, QuerySet) and not queryset.query.where:
            estimate = estimated_rows(queryset)
            if estimate is not None and estimate > ESTIMATE_ABOVE:
                return estimate
        return super().count
