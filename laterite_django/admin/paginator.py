"""A changelist paginator that does not count a whole big table on every page load.

Unfiltered, it asks the store for the database's row estimate (on PostgreSQL
the planner's `pg_class.reltuples`, kept fresh by autovacuum) instead of
running `SELECT COUNT(*)` over every row; filtered lists, small tables and
databases without an estimate are counted exactly.
"""

from __future__ import annotations

from django.core.paginator import Paginator
from django.db.models import QuerySet
from django.utils.functional import cached_property

from ..stores import get_store

__all__ = ["ESTIMATE_ABOVE", "EstimatedCountPaginator"]

# Below this many rows an exact count is cheap, and exact numbers read better.
ESTIMATE_ABOVE = 10_000


class EstimatedCountPaginator(Paginator):
    """Count rows exactly, except an unfiltered big table, which is estimated."""

    @cached_property
    def count(self) -> int:
        queryset = self.object_list
        if isinstance(queryset, QuerySet) and not queryset.query.where:
            estimate = get_store().estimated_rows(queryset.model)
            if estimate is not None and estimate > ESTIMATE_ABOVE:
                return estimate
        return super().count
