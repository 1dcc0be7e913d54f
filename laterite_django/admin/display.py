"""How the admin shows a job's values: moments, payloads and tracebacks as HTML."""

from __future__ import annotations

import json
from datetime import datetime

from django.utils import timezone
from django.utils.html import format_html
from django.utils.safestring import SafeString

__all__ = ["moment", "preformatted", "pretty_json"]


def preformatted(text: str) -> SafeString:
    """Show text as it is, line breaks and spaces kept, escaped."""
    return format_html('<pre class="laterite-pre">{}</pre>', text)


def moment(value: datetime | None) -> SafeString | str:
    """Show a moment compactly (the list has many columns), the full timestamp on hover."""
    if value is None:
        return "-"
    local = timezone.localtime(value)
    return format_html(
        '<time datetime="{}" title="{}">{}</time>',
        value.isoformat(), local.isoformat(sep=" ", timespec="milliseconds"),
        local.strftime("%Y-%m-%d %H:%M:%S"),
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
