"""Tests of each row that no index answers, kept to a bounded window: a job's argument
(a JSON key and value, `order_id=8812`) and the class of a failed job's error.

The admin's lists filter by them. Such a test reads every row it is given, so it is
given only the `scan` newest rows that the indexed filters (queue, name, time) keep:
whatever the table holds, a filter reads at most that many rows, and says when the
window was full (older rows were not looked at), as `queue_history --arg` does.

Arguments are matched as the job history's search matches them (`history.argument_filter`,
on the `args` and `kwargs` JSON columns of a record); the job and failed tables keep the
payload as text, parsed by the database for the rows of the window (`parsed_payload`).
An encrypted argument is stored as "[encrypted]": it cannot be matched by its value.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from django.db.models import Func, JSONField, Q, QuerySet
from django.db.models.fields.json import KeyTransform

from .history import argument_filter

__all__ = ["SCAN", "ParsedPayload", "arguments_filter", "error_class_filter", "newest"]

# Rows a test of each row looks through at most, newest first.
SCAN = 100_000

# A class name as `describe` writes it (module.Qualname): dotted identifiers.
_DOTTED = re.compile(r"[^\W\d]\w*(\.[^\W\d]\w*)*")


class ParsedPayload(Func):
    """A payload's text as JSON, NULL where the database cannot read it as JSON: on
    PostgreSQL one holding the escape of a NUL character (valid JSON that jsonb refuses)
    or not shaped as an object; on SQLite one `json_valid` refuses."""

    arity = 1
    output_field = JSONField()
    template = "CASE WHEN json_valid(%(expressions)s) THEN %(expressions)s END"

    def as_postgresql(self, compiler: Any, connection: Any, **extra: Any) -> Any:
        return self.as_sql(
            compiler, connection,
            template=(r"CASE WHEN strpos(%(expressions)s, '\u0000') = 0 "
                      r"AND left(%(expressions)s, 1) = '{' "
                      r"AND right(%(expressions)s, 1) = '}' "
                      r"THEN (%(expressions)s)::jsonb END"),
            **extra)


def arguments_filter(rows: QuerySet, arguments: Sequence[tuple[str, Any]], *,
                     payload: str | None) -> QuerySet:
    """`rows` whose argument `key` is `value`, for each (key, value): read from the
    text column `payload` (jobs, failed jobs), or from the record's own `args` and
    `kwargs` columns (payload None: the job history)."""
    if not arguments:
        return rows
    postgres = rows.db and _vendor(rows.db) == "postgresql"
    if payload is not None:
        parsed = ParsedPayload(payload, output_field=JSONField())
        rows = rows.alias(args=KeyTransform("args", parsed), kwargs=KeyTransform("kwargs", parsed))
    for key, value in arguments:
        rows = rows.filter(argument_filter(bool(postgres), key, value))
    return rows


def error_class_filter(field: str, name: str) -> Q:
    """The Q of rows whose error (text column `field`) is of the class `name`: its first
    line, as the worker writes it, is "module.Class: message" (or the class alone);
    `name` is the class alone (SMTPException) or with its module (smtplib.SMTPException).

    Raise ValueError naming `name` if it is no class name."""
    name = name.strip()
    if not _DOTTED.fullmatch(name):
        raise ValueError(f"{name!r} is not a class name (e.g. SMTPException or "
                         f"smtplib.SMTPException)")
    # (PostgreSQL's brackets take no \W: the module's words spelled out.)
    pattern = r"^([A-Za-z_]\w*\.)*" + re.escape(name) + r"(:|\n|$)"
    # A plain prefix test first: the database answers it without the regex engine.
    return Q(**{f"{field}__contains": name.rsplit(".", 1)[-1]}) & Q(**{f"{field}__regex": pattern})


def newest(rows: QuerySet, order: Sequence[str], scan: int = SCAN) -> tuple[QuerySet, bool]:
    """The rows of `rows` among its `scan` newest by `order` (its filters so far kept),
    as a queryset to filter further; and whether that window was full (older rows
    were left out).

    The window is a range of `order`'s first field, from the `scan`-th newest row's
    value on (read first, one walk of its index): the tests then read that range by the
    same index, where `pk IN (the window's ids)` would join every row of the table. Rows
    tied with that value are all in (a few more than `scan`, at most)."""
    first = order[0]
    field = first.lstrip("-")
    edge = rows.order_by(*order).values_list(field, flat=True)[scan - 1 : scan]
    found = list(edge)
    if not found:
        return rows, False
    lookup = "gte" if first.startswith("-") else "lte"
    return rows.filter(**{f"{field}__{lookup}": found[0]}), True


def _vendor(database: str) -> str:
    from django.db import connections

    return connections[database].vendor

