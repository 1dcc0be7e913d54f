"""How the admin shows a job's values: moments, payloads and tracebacks as HTML."""

from __future__ import annotations

import json
import re
from datetime import datetime
from typing import Any

from django.utils import timezone
from django.utils.formats import date_format
from django.utils.html import conditional_escape, format_html
from django.utils.safestring import SafeString, mark_safe
from django.utils.text import Truncator

from ..core.progress import Progress

__all__ = ["breakable", "fraction_bar", "moment", "preformatted", "pretty_json", "progress_bar"]

# Where a long job, queue or host name may wrap in a narrow column.
_BREAK_AFTER = re.compile(r"([._:/-])")


def preformatted(text: str) -> SafeString:
    """Show text as it is, line breaks and spaces kept, escaped."""
    return format_html('<pre class="laterite-pre">{}</pre>', text)


def breakable(text: str) -> SafeString:
    """Show a name (dotted path, host:pid) escaped, free to wrap after its separators."""
    parts = _BREAK_AFTER.split(text)  # text, separator, text, separator, ..., text
    return mark_safe("".join(  # every part is escaped
        conditional_escape(part) + ("<wbr>" if i % 2 else "") for i, part in enumerate(parts)
    ))


def moment(value: datetime | None, *, stacked: bool = False) -> SafeString | str:
    """Show a moment in Django's DATETIME_FORMAT, as the rest of the admin does, with
    the exact timestamp (to the millisecond) on hover. Every date on the queue's pages
    goes through here, lists and detail pages alike. `stacked`: its DATE_FORMAT above
    its TIME_FORMAT, for a list with two dates to fit."""
    if value is None:
        return "-"
    local = timezone.localtime(value)
    shown = date_format(local, "DATETIME_FORMAT") if not stacked else format_html(
        "{}<br>{}", date_format(local, "DATE_FORMAT"), date_format(local, "TIME_FORMAT"))
    return format_html(
        '<time datetime="{}" title="{}">{}</time>',
        value.isoformat(), local.isoformat(sep=" ", timespec="milliseconds"), shown,
    )


def pretty_json(text: str) -> SafeString:
    """Show a payload as indented JSON, or as it is stored if it is not valid JSON."""
    try:
        data = json.loads(text)
    except (TypeError, ValueError) as e:
        return format_html(
            '<p class="errornote">The payload is not valid JSON: {}</p>{}', e, preformatted(text)
        )
    return preformatted(json.dumps(data, indent=2, ensure_ascii=False, sort_keys=False))


def progress_bar(job: Any) -> SafeString | str:
    """A running job's progress (`cx.progress`): a bar when it has a total, then its
    words (the note cut short, whole on hover); "" when its attempt said none."""
    progress = Progress.parse(getattr(job, "progress", ""), job.token)
    if progress is None:
        return ""
    return fraction_bar(progress.fraction, progress.describe())


def fraction_bar(fraction: float | None, said: str) -> SafeString:
    """How far something is (a running job, a batch): a bar when the fraction is known,
    then the words (cut short, whole on hover)."""
    bar = format_html('<progress max="1" value="{}"></progress> ', f"{fraction:.3f}") if (
        fraction is not None) else ""
    return format_html('<span class="laterite-progress" title="{}">{}{}</span>', said, bar,
                       Truncator(said).chars(40))
