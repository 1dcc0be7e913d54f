"""The overview's chart: jobs succeeded and failed per minute, as inline SVG drawn on
the server (no script, no CDN, nothing for the admin's static files to serve)."""

from __future__ import annotations

from collections.abc import Sequence

from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

__all__ = ["minute_chart"]

WIDTH = 600  # px: 60 bars of 10 px
HEIGHT = 80
TOP = 14  # room for the scale's label


def minute_chart(series: Sequence[tuple[int, int]], label: str) -> SafeString:
    """Bars for `series`, one (succeeded, failed) pair per minute, the oldest first:
    succeeded in green, failed in red on top; the scale is the busiest minute."""
    bar = WIDTH / max(len(series), 1)
    peak = max((s + f for s, f in series), default=0) or 1
    usable = HEIGHT - TOP
    bars = []
    for index, (succeeded, failed) in enumerate(series):
        x = index * bar
        ok = usable * succeeded / peak
        bad = usable * failed / peak
        minutes_ago = len(series) - 1 - index
        when = f"{minutes_ago} min ago" if minutes_ago else "this minute"
        title = f"{when}: {succeeded} succeeded, {failed} failed"
        if succeeded:
            bars.append(("laterite-bar-ok", f"{x:.1f}", f"{HEIGHT - ok:.1f}",
                         f"{bar - 1:.1f}", f"{ok:.1f}", title))
        if failed:
            bars.append(("laterite-bar-failed", f"{x:.1f}", f"{HEIGHT - ok - bad:.1f}",
                         f"{bar - 1:.1f}", f"{bad:.1f}", title))
    rects = format_html_join(
        "", '<rect class="{}" x="{}" y="{}" width="{}" height="{}"><title>{}</title></rect>',
        bars)
    return format_html(
        '<svg class="laterite-chart" role="img" aria-label="{}" viewBox="0 0 {} {}" '
        'width="{}" height="{}" xmlns="http://www.w3.org/2000/svg">'
        '<line class="laterite-axis" x1="0" y1="{}" x2="{}" y2="{}"></line>'
        '<text class="laterite-scale" x="2" y="10">{} / min</text>{}</svg>',
        label, WIDTH, HEIGHT, WIDTH, HEIGHT, HEIGHT - 0.5, WIDTH, HEIGHT - 0.5,
        peak if any(s + f for s, f in series) else 0, rects,
    )
