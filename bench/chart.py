"""Draw bench/results/benchmarks.png from bench/results/benchmarks.json (runs in the `report` venv).

python -m bench.chart bench/results/benchmarks.json bench/results/benchmarks.png

A run of the scale scenarios (bench/scenarios.py) is drawn by `draw_scale`: into
the PNG itself when the run has none of the table's figures, otherwise into
`<name>-scale.png` beside it.
"""

import json
import math
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.ticker import NullFormatter

from bench.report import COLUMNS, SCENARIO_KEYS, table_rows, value

__all__ = ["draw", "draw_scale", "scale_png"]

COLORS = {"floor": "#9e9e9e", "peer": "#4c78a8", "laterite": "#e45756", "ref": "#f4a6a6"}
STORE_SHORT = {"PostgreSQL": "PG", "Redis": "Redis", "SQLite": "SQLite"}


def draw(run, path):
    results = run["results"]
    rows = [(desc, res) for desc, res in table_rows(results) if not res.get("failed")]
    # A column no row measured (drains with 2 and 4 processes under --workers 1) gets
    # no empty panel.
    panels = [c for c in COLUMNS if c[0] != "p95"
              and any(value(res, c[0]) is not None for _, res in rows)]
    lines = max(1, math.ceil(len(panels) / 3))
    fig, axes = plt.subplots(lines, 3, figsize=(18, (2 + 0.21 * len(rows)) * lines),
                             squeeze=False)
    for ax in axes.flat[len(panels):]:
        ax.set_visible(False)
    labels = [f"{d.name} ({STORE_SHORT[d.store]})" for d, _ in rows][::-1]
    for ax, (key, heading, higher) in zip(axes.flat, panels, strict=False):
        vals = [value(res, key) for _, res in rows][::-1]
        colors = [COLORS["ref" if d.ref else d.kind] for d, _ in rows][::-1]
        ys = range(len(rows))
        ax.barh(ys, [v or 0 for v in vals], color=colors)
        if key == "p50":
            p95 = [value(res, "p95") for _, res in rows][::-1]
            ax.scatter([v or 0 for v in p95], ys, marker="|", color="black", s=80, label="p95")
            ax.legend(loc="lower right", fontsize=8)
        ax.set_xscale("log")
        shown = [v for v in vals if v] + ([v for v in p95 if v] if key == "p50" else [])
        if shown:
            # Bars start at a whole decade, so their lengths compare honestly.
            ax.set_xlim(10 ** math.floor(math.log10(min(shown))), max(shown) * 3)
        ax.xaxis.set_minor_formatter(NullFormatter())
        prev = None
        for y, (d, _) in zip(ys, rows[::-1], strict=True):
            if prev is not None and d.store != prev:
                ax.axhline(y - 0.5, color="black", linewidth=0.6)
            prev = d.store
        ax.set_yticks(list(ys))
        ax.set_yticklabels(labels, fontsize=8)
        ax.set_title(heading + ("" if higher else " (lower is better)"), fontsize=10)
        for y, v in zip(ys, vals, strict=True):
            if v:
                ax.text(v, y, f" {v:,.0f}" if v >= 10 else f" {v:.1f}", va="center", fontsize=7)
        ax.grid(axis="x", which="both", alpha=0.25)
    meta = run["meta"]
    fig.suptitle(
        f"laterite_django and peers: N={meta['n']} no-op jobs, {meta['date']},"
        f" {meta['nproc']} cores ({meta['cpu']}); grey = bare floor, blue = peer,"
        " red = laterite"
        + (", pink = laterite at an earlier commit" if any(d.ref for d, _ in rows) else ""),
        fontsize=11,
    )
    fig.tight_layout(rect=(0, 0, 1, 0.96))
    fig.savefig(path, dpi=90)


def _has_figures(run):
    return any(
        value(res, key) is not None for res in run["results"].values() for key, _, _ in COLUMNS
    )


def scale_png(run, path):
    """Where the scale chart of `run` goes when the main chart is at `path`, or None."""
    drawn = [k for k in SCENARIO_KEYS if k != "flow"]  # flow is a table only
    if not any(res.get(k) for res in run["results"].values() for k in drawn):
        return None
    if not _has_figures(run):
        return str(path)
    return str(path).removesuffix(".png") + "-scale.png"


def draw_scale(run, path):
    """Dead-tuple ratios, drain against backlog size, idle CPU: one panel each."""
    rows = [(d, r) for d, r in table_rows(run["results"]) if not r.get("failed")]
    fig, axes = plt.subplots(1, 3, figsize=(18, 5), squeeze=False)
    ax_churn, ax_backlog, ax_idle = axes[0]

    churn = [(d, r["churn"]) for d, r in rows if (r.get("churn") or {}).get("fresh")]
    names = [d.name for d, _ in churn]

    def vs_fresh(c, key):  # as in the report: against the fresh drains either side
        fig = c.get(key)
        if not fig:
            return 0
        return fig.get("vs_fresh", fig["median"] / c["fresh"]["median"])

    for k, (key, label) in enumerate((("cleared", "after B cleared"), ("ran", "after B ran"))):
        vals = [vs_fresh(c, key) for _, c in churn]
        ys = [i + (k - 0.5) * 0.38 for i in range(len(churn))]
        ax_churn.barh(ys, vals, height=0.36, label=label, color=("#e45756", "#4c78a8")[k])
        for y, v in zip(ys, vals, strict=True):
            ax_churn.text(v, y, f" {v:.2f}", va="center", fontsize=8)
    ax_churn.axvline(1, color="black", linewidth=0.6)
    top = [vs_fresh(c, k) for _, c in churn for k in ("cleared", "ran")]
    ax_churn.set_xlim(0, max([1.2, *top]) * 1.3)
    ax_churn.set_yticks(range(len(churn)))
    ax_churn.set_yticklabels(names, fontsize=8)
    ax_churn.set_title("PostgreSQL drain after churn, no VACUUM / fresh drain", fontsize=10)
    if churn:
        ax_churn.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.06), ncol=2)

    for d, r in rows:
        waiting = [x for x in (r.get("backlog") or {}).get("rows", []) if x["kind"] == "waiting"]
        if waiting:
            color = COLORS["ref" if d.ref else d.kind]
            style = "-" if d.store == "PostgreSQL" else "--"
            ax_backlog.plot(
                [x["size"] for x in waiting],
                [x.get("drain") or 0 for x in waiting],
                style,
                marker="o",
                color=color if d.kind == "laterite" else None,
                label=f"{d.name} ({STORE_SHORT[d.store]})",
            )
    ax_backlog.set_xscale("log")
    ax_backlog.set_yscale("log")
    ax_backlog.set_xlabel("jobs already waiting", fontsize=9)
    ax_backlog.set_title("drain 1 proc /s of the backlog's head", fontsize=10)
    ax_backlog.grid(which="both", alpha=0.25)
    if ax_backlog.get_lines():
        ax_backlog.legend(fontsize=8)

    idle = [(d, r["idle"]) for d, r in rows if r.get("idle")]
    ys = range(len(idle))
    vals = [x["cpu_pct"] for _, x in idle]
    ax_idle.barh(list(ys), vals, color=COLORS["laterite"])
    for y, v in zip(ys, vals, strict=True):
        ax_idle.text(v, y, f" {v:.2f}%", va="center", fontsize=8)
    ax_idle.set_yticks(list(ys))
    ax_idle.set_yticklabels([f"{d.name} ({x['processes']} procs)" for d, x in idle], fontsize=8)
    ax_idle.set_title("idle workers: CPU, % of one core", fontsize=10)
    if vals:
        ax_idle.set_xlim(0, max(max(vals) * 1.4, 1))

    meta = run["meta"]
    fig.suptitle(
        f"laterite_django at scale: {meta['date']}, {meta['nproc']} cores ({meta['cpu']})",
        fontsize=11,
    )
    fig.tight_layout(rect=(0, 0, 1, 0.94))
    fig.savefig(path, dpi=90)


def main():
    with open(sys.argv[1]) as f:
        run = json.load(f)
    scale = scale_png(run, sys.argv[2])
    if _has_figures(run):
        draw(run, sys.argv[2])
    if scale:
        draw_scale(run, scale)


if __name__ == "__main__":
    main()
