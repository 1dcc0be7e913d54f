"""The overview's charts: jobs succeeded and failed per minute (the last hour) or per
quarter of an hour (the last day), and the queue's latency (the oldest waiting job's
age) per quarter of an hour over the last day, as inline SVG drawn on the server (no
script, no CDN, nothing for the admin's static files to serve)."""

from __future__ import annotations

from collections.abc import Sequence

from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from ..worker.attempt import for_humans

__all__ = ["latency_chart", "minute_chart"]

WIDTH = 600  # px: 60 bars of 10 px
HEIGHT = 80
TOP = 14  # room for the scale's label


def _ago(minutes: int) -> str:
    if minutes < 60:
        return f"{minutes} min ago"
    hours, rest = divmod(minutes, 60)
    return f"{hours} h {rest} min ago" if rest else f"{hours} h ago"


def _when(minutes_ago: int, step: int) -> str:
    if step == 1:
        return _ago(minutes_ago) if minutes_ago else "this minute"
    return (f"from {_ago(minutes_ago + step - 1)} to {_ago(minutes_ago)}"
            if minutes_ago else f"the last {step} min")


def minute_chart(series: Sequence[tuple[int, int]], label: str, step: int = 1) -> SafeString:
    """Bars for `series`, one (succeeded, failed) pair per `step` minutes, the oldest
    first: succeeded in green, failed in red on top; the scale is the busiest bar."""
    bar = WIDTH / max(len(series), 1)
    peak = max((s + f for s, f in series), default=0) or 1
    usable = HEIGHT - TOP
    bars = []
    for index, (succeeded, failed) in enumerate(series):
        x = index * bar
        ok = usable * succeeded / peak
        bad = usable * failed / peak
        when = _when((len(series) - 1 - index) * step, step)
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
    scale = (f"{peak if any(s + f for s, f in series) else 0} / "
             f"{'min' if step == 1 else f'{step} min'}")
    return _svg("laterite-chart", label, scale, rects)


def latency_chart(series: Sequence[float | None], label: str, step: int = 1) -> SafeString:
    """Bars for `series`, one per `step` minutes, the oldest first: the longest the
    queue's oldest due waiting job had waited in the samples of those minutes (seconds;
    None: no worker sampled them, no bar). The scale is the longest wait."""
    bar = WIDTH / max(len(series), 1)
    peak = max((value for value in series if value is not None), default=0.0)
    usable = HEIGHT - TOP
    bars = []
    for index, value in enumerate(series):
        if value is None:
            continue
        height = usable * value / peak if peak else 0.0
        when = _when((len(series) - 1 - index) * step, step)
        title = (f"{when}: the oldest waiting job had waited {for_humans(value)}" if value
                 else f"{when}: no job waited")
        # A sample of 0 still shows as a sliver: the queue was sampled and nothing waited.
        bars.append((f"{index * bar:.1f}", f"{HEIGHT - max(height, 1):.1f}",
                     f"{bar - 1:.1f}", f"{max(height, 1):.1f}", title))
    rects = format_html_join(
        "", '<rect class="laterite-bar-latency" x="{}" y="{}" width="{}" height="{}">'
            '<title>{}</title></rect>', bars)
    scale = f"longest wait {for_humans(peak) if peak else '0 s'}"
    return _svg("laterite-chart laterite-latency-chart", label, scale, rects)


def _svg(classes: str, label: str, scale: str, rects: SafeString) -> SafeString:
    """The frame both charts draw their bars in: the axis, and `scale` top left."""
    return format_html(
        '<svg class="{}" role="img" aria-label="{}" viewBox="0 0 {} {}" '
        'width="{}" height="{}" xmlns="http://www.w3.org/2000/svg">'
        '<line class="laterite-axis" x1="0" y1="{}" x2="{}" y2="{}"></line>'
        '<text class="laterite-scale" x="2" y="10">{}</text>{}</svg>',
        classes, label, WIDTH, HEIGHT, WIDTH, HEIGHT, HEIGHT - 0.5, WIDTH, HEIGHT - 0.5,
        scale, rects,
    )
