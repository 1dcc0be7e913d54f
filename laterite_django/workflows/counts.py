"""A batch's counts, kept in the database for every store: moved to
`stores/database/workflows.py`, with the rest of the database's SQL. Kept here for the
stores that import them from this path."""

from __future__ import annotations

from ..stores.database.workflows import count_ends, finish_settled, finished_jobs

__all__ = ["count_ends", "finish_settled", "finished_jobs"]
