"""The lists' search form: by argument (`?arg=order_id=8812`, repeatable), by the class
of the error (`?error=SMTPException`) and by a time range (`?since=`, `?until=`, ISO
8601), in the filters' sidebar.

The time range goes by an index where the table has one (a failed job's `failed_at`, a
record's `finished_at`). An argument or an error class is a test of each row: it looks
only through the `scan` newest rows the other filters keep (stores/database/matching.py),
so a page answers in the same time over 10^6 rows as over 10^4, and a notice says when
that window was full. An encrypted argument is stored as "[encrypted]" and cannot be
matched by its value.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Any, ClassVar

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from ..stores.database.matching import (
    SCAN,
    arguments_filter,
    error_class_filter,
    newest,
    parse_argument,
    parse_moment,
)

__all__ = ["WINDOWED", "ConsoleFilter", "console_filter"]

PARAMETERS = ("arg", "error", "since", "until")

# Set on the request when a test of each row reads the window: the list then reads
# its page and its count in one query (paginator.py).
WINDOWED = "_laterite_windowed"


class ConsoleFilter(admin.ListFilter):
    """Argument, error class and time range; each list says where they are read."""

    title = "search"
    template = "laterite_django/admin/console_filter.html"

    # Set by each list's subclass:
    time_field: ClassVar[str]  # the moment the range applies to
    time_label: ClassVar[str]
    time_indexed: ClassVar[bool]  # False: a test of each row, in the window
    payload: ClassVar[str | None]  # the text column holding the arguments (None: a record)
    error_field: ClassVar[str | None]  # None: no error filter
    order: ClassVar[tuple[str, ...]]  # newest first, by an index
    scan: ClassVar[int] = SCAN

    def __init__(self, request: HttpRequest, params: dict[str, list[str]], model: Any,
                 model_admin: Any) -> None:
        # django-stubs types the parameters as str, where Django 5+ gives each a list.
        super().__init__(request, params, model, model_admin)  # type: ignore[arg-type]
        self.values: dict[str, list[str]] = {}
        for name in PARAMETERS:
            if name in params:
                given = [v for v in params.pop(name) if v.strip()]
                if given:
                    self.values[name] = given
                    self.used_parameters[name] = given[-1]
        self.errors: list[str] = []
        self.arguments: list[tuple[str, Any]] = []
        for text in self.values.get("arg", []):
            try:
                self.arguments.append(parse_argument(text))
            except ValueError as e:
                self.errors.append(str(e))
        self.moments: dict[str, datetime] = {}
        for name in ("since", "until"):
            if name in self.values:
                try:
                    self.moments[name] = parse_moment(self.values[name][-1])
                except ValueError as e:
                    self.errors.append(str(e))
        self.error_class = self.values.get("error", [""])[-1] if self.error_field else ""
        # After queryset(): whether a test of each row stopped at the window's end.
        self.window_full = False

    def has_output(self) -> bool:
        return True

    def expected_parameters(self) -> list[str | None]:
        return list(PARAMETERS)

    @property
    def row_tests(self) -> bool:
        """Whether a filter reads each row (so only the window's)."""
        return bool(self.arguments or self.error_class
                    or (self.moments and not self.time_indexed))

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        if self.error_class and self.error_field:
            try:
                error_q = error_class_filter(self.error_field, self.error_class)
            except ValueError as e:
                self.errors.append(str(e))
        if self.errors:
            for said in self.errors:
                messages.error(request, f"Nothing listed: {said}.")
            return queryset.none()
        rows = queryset
        if self.time_indexed:
            rows = self._in_range(rows)
        if not self.row_tests:
            return rows
        rows, self.window_full = newest(rows, self.order, self.scan)
        setattr(request, WINDOWED, True)
        if not self.time_indexed:
            rows = self._in_range(rows)
        if self.error_class:
            rows = rows.filter(error_q)
        return arguments_filter(rows, self.arguments, payload=self.payload)

    def _in_range(self, rows: QuerySet) -> QuerySet:
        if "since" in self.moments:
            rows = rows.filter(**{f"{self.time_field}__gte": self.moments["since"]})
        if "until" in self.moments:
            rows = rows.filter(**{f"{self.time_field}__lt": self.moments["until"]})
        return rows

    def choices(self, changelist: Any) -> Iterator[Any]:  # the template's own fields
        """One choice: the form, its fields' values, and the other filters' parameters
        as hidden fields (so the form keeps them)."""
        kept = [(name, value) for name, values in changelist.filter_params.items()
                if name not in PARAMETERS and name != "p" for value in values]
        yield {
            "hidden": kept,
            "args": self.values.get("arg", []) or [""],
            "error": self.values.get("error", [""])[-1],
            "since": self.values.get("since", [""])[-1],
            "until": self.values.get("until", [""])[-1],
            "clear": changelist.get_query_string(remove=list(PARAMETERS)),
        }

    @property
    def notice(self) -> str:
        """What to tell the user when the window was full."""
        if not self.window_full:
            return ""
        return (f"The argument, error and time tests looked through the {self.scan:,} "
                f"newest rows only: older rows may match too. Narrow the list by queue, "
                f"name{' or time' if self.time_indexed else ''} first.")


def console_filter(*, time_field: str, time_label: str, time_indexed: bool,
                   payload: str | None, error_field: str | None,
                   order: tuple[str, ...]) -> type[ConsoleFilter]:
    """A ConsoleFilter for one list."""
    return type("ConsoleFilter", (ConsoleFilter,), {
        "time_field": time_field, "time_label": time_label, "time_indexed": time_indexed,
        "payload": payload, "error_field": error_field, "order": order,
    })
