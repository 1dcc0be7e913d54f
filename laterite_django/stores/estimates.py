"""Cheap reads of big tables, for the admin's lists: distinct job names, row estimates.

Each is one SQL statement on a database alias, written so its cost does not
grow with the number of rows: the admin shows them on every page load.
"""

from __future__ import annotations

from django.db import connections
from django.db.models import Model

__all__ = ["distinct_names", "estimated_rows"]


def distinct_names(database: str, model: type[Model], limit: int = 500, *,
                   column: str = "name") -> list[str]:
    """Return the first `limit` distinct values of `model`'s `column` (its job names
    unless told), sorted.

    Where an index leads with `column` (the failed list's name index, the job
    history's name and queue indexes), one query that jumps from value to value
    through it (a loose index scan), so its cost grows with the number of values,
    not of rows. Where none does (the job table: such an index would cost every push
    and every claim), `SELECT DISTINCT`, which reads every row once.
    """
    if limit < 1:
        raise ValueError(f"limit must be 1 or more, got {limit!r}.")
    connection = connections[database]
    quote = connection.ops.quote_name
    table = quote(model._meta.db_table)
    name = quote(column)  # a column named as its field (name, queue)
    if any(index.fields and index.fields[0] == column for index in model._meta.indexes):
        sql = (
            f"WITH RECURSIVE names(name, n) AS ("
            f"SELECT MIN({name}), 1 FROM {table} "
            f"UNION ALL SELECT (SELECT MIN({name}) FROM {table} WHERE {name} > names.name), "
            f"n + 1 FROM names WHERE names.name IS NOT NULL AND n < %s"
            f") SELECT name FROM names WHERE name IS NOT NULL"
        )
    else:
        sql = f"SELECT DISTINCT {name} FROM {table} ORDER BY {name} LIMIT %s"
    with connection.cursor() as cursor:
        cursor.execute(sql, [limit])
        return [row[0] for row in cursor.fetchall()]


def estimated_rows(database: str, model: type[Model]) -> int | None:
    """Return PostgreSQL's estimate of the rows in `model`'s table, or None.

    The planner's `pg_class.reltuples`, kept fresh by autovacuum: no row is
    read. None when the database is not PostgreSQL or the table was never
    analyzed.
    """
    connection = connections[database]
    if connection.vendor != "postgresql":
        return None
    table = connection.ops.quote_name(model._meta.db_table)
    with connection.cursor() as cursor:
        # A partitioned table (the job history's) has no rows of its own: its partitions'.
        cursor.execute(
            "SELECT CASE WHEN c.relkind = 'p' THEN (SELECT sum(GREATEST(p.reltuples, 0)) "
            "FROM pg_inherits i JOIN pg_class p ON p.oid = i.inhrelid "
            "WHERE i.inhparent = c.oid)::bigint ELSE c.reltuples::bigint END "
            "FROM pg_class c WHERE c.oid = %s::regclass", [table])
        row = cursor.fetchone()
    # PostgreSQL 14+ reports -1 for a table never vacuumed or analyzed.
    if row is None or row[0] is None or row[0] < 0:
        return None
    return int(row[0])
