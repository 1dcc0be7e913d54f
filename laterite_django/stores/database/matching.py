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

import json
import re
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from django.db.models import Func, JSONField, Q, QuerySet
from django.db.models.fields.json import KeyTransform
from django.utils.dateparse import parse_date, parse_datetime

from .history import argument_filter

__all__ = [
    "SCAN", "ParsedPayload", "arguments_filter", "error_class_filter", "newest",
    "parse_argument", "parse_moment",
]

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
    # The class as written (a builtin, or the module given) is a prefix test; the
    # regex engine reads only the rows naming it after a module's dot.
    return (Q(**{f"{field}__startswith": f"{name}:"}) | Q(**{f"{field}__startswith": f"{name}\n"})
            | Q(**{field: name})
            | (Q(**{f"{field}__contains": f".{name}"}) & Q(**{f"{field}__regex": pattern})))


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
    # The scan-th newest value and the one after it, if any: the window is full only
    # when an older row was left out (exactly `scan` rows fit in it whole).
    found = list(rows.order_by(*order).values_list(field, flat=True)[scan - 1 : scan + 1])
    if len(found) < 2:
        return rows, False
    lookup = "gte" if first.startswith("-") else "lte"
    return rows.filter(**{f"{field}__{lookup}": found[0]}), True


def parse_argument(text: str) -> tuple[str, Any]:
    """KEY=VALUE: VALUE read as JSON when it is (8812, true, "8812"), else as text.
    Raise ValueError naming `text` if it is not KEY=VALUE."""
    key, sep, value = text.strip().partition("=")
    key = key.strip()
    if not sep or not key:
        raise ValueError(f"{text!r} is not KEY=VALUE (e.g. order_id=8812)")
    try:
        return key, json.loads(value)
    except ValueError:
        return key, value


def parse_moment(text: str) -> datetime:
    """An ISO 8601 date or date and time (UTC unless it says otherwise). Raise ValueError
    naming `text` if it is neither."""
    found = parse_datetime(text.strip())
    if found is None:
        day = parse_date(text.strip())
        if day is None:
            raise ValueError(f"{text!r} is not an ISO 8601 date or time (e.g. 2026-12-07T18:00)")
        found = datetime(day.year, day.month, day.day)
    return found if found.tzinfo is not None else found.replace(tzinfo=UTC)


def _vendor(database: str) -> str:
    from django.db import connections

    return connections[database].vendor

