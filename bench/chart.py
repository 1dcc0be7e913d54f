"""Draw docs/benchmarks.png from docs/benchmarks.json (runs in the `report` venv).

python -m bench.chart docs/benchmarks.json docs/benchmarks.png
"""

import json
import math
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.ticker import NullFormatter

from bench.report import COLUMNS, table_rows, value

__all__ = ["draw"]

COLORS = {"floor": "#9e9e9e", "peer": "#4c78a8", "laterite": "#e45756", "ref": "#f4a6a6"}
STORE_SHORT = {"PostgreSQL": "PG", "Redis": "Redis", "SQLite": "SQLite"}


def draw(run, path):
    results = run["results"]
    rows = [(desc, res) for desc, res in table_rows(results) if not res.get("failed")]
    panels = [c for c in COLUMNS if c[0] != "p95"]
    fig, axes = plt.subplots(2, 3, figsize=(18, 4 + 0.42 * len(rows)), squeeze=False)
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


def main():
    with open(sys.argv[1]) as f:
        run = json.load(f)
    draw(run, sys.argv[2])


if __name__ == "__main__":
    main()
