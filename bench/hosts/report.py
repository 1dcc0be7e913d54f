"""bench/results/scale.md and its chart (an SVG drawn here, no plotting library needed) from the
results of `python -m bench.hosts`."""

from __future__ import annotations

import json
import os
import platform
from pathlib import Path
from typing import Any

import psutil

__all__ = ["svg", "write"]

STORE_NAMES = {"database": "PostgreSQL", "pgbouncer": "PostgreSQL via PgBouncer",
               "redis": "Redis"}
COLORS = {"database": "#4c78a8", "pgbouncer": "#72b7b2", "redis": "#e45756"}


def _scale_rows(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in results if not r.get("fault") and not r.get("slow_every")]


def svg(results: list[dict[str, Any]]) -> str:
    """Jobs/s by hosts (bars), the store's CPU (dots on a line), one group per store."""
    rows = _scale_rows(results)
    width, height, left, bottom, top = 640, 340, 60, 50, 30
    plot_w, plot_h = width - left - 60, height - bottom - top
    top_rate = max([r["jobs_per_s"] or 0 for r in rows] + [1]) * 1.15
    stores = [s for s in STORE_NAMES if any(r["store"] == s for r in rows)]
    hosts = sorted({r["hosts"] for r in rows})
    group_w = plot_w / max(1, len(hosts))
    bar_w = group_w / (len(stores) + 1)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'font-family="sans-serif" font-size="12">',
           f'<rect width="{width}" height="{height}" fill="white"/>',
           f'<text x="{width / 2}" y="18" text-anchor="middle" font-size="14">'
           f'Jobs/s drained by 1-4 simulated hosts x 4 workers (bars); store CPU % '
           f'(dots, right axis)</text>']
    y0 = top + plot_h
    out.append(f'<line x1="{left}" y1="{y0}" x2="{left + plot_w}" y2="{y0}" stroke="black"/>')
    out.append(f'<line x1="{left}" y1="{top}" x2="{left}" y2="{y0}" stroke="black"/>')
    out.append(f'<line x1="{left + plot_w}" y1="{top}" x2="{left + plot_w}" y2="{y0}" '
               f'stroke="black"/>')
    for k in range(5):
        value = top_rate * k / 4
        y = y0 - plot_h * k / 4
        out.append(f'<text x="{left - 6}" y="{y + 4}" text-anchor="end">{value:,.0f}</text>')
        out.append(f'<text x="{left + plot_w + 6}" y="{y + 4}">{50 * k}%</text>')
        out.append(f'<line x1="{left}" y1="{y}" x2="{left + plot_w}" y2="{y}" '
                   f'stroke="#ddd"/>')
    for gi, n in enumerate(hosts):
        gx = left + gi * group_w
        out.append(f'<text x="{gx + group_w / 2}" y="{y0 + 18}" text-anchor="middle">'
                   f'{n} host{"s" if n > 1 else ""}</text>')
        for si, store in enumerate(stores):
            row = next((r for r in rows if r["store"] == store and r["hosts"] == n), None)
            if row is None:
                continue
            rate = row["jobs_per_s"] or 0
            bh = plot_h * rate / top_rate
            x = gx + bar_w * (si + 0.5)
            out.append(f'<rect x="{x:.1f}" y="{y0 - bh:.1f}" width="{bar_w * 0.9:.1f}" '
                       f'height="{bh:.1f}" fill="{COLORS[store]}"/>')
            out.append(f'<text x="{x + bar_w * 0.45:.1f}" y="{y0 - bh - 4:.1f}" '
                       f'text-anchor="middle" font-size="10">{rate:,}</text>')
            cy = y0 - plot_h * min(row["store_cpu_pct"], 200) / 200
            out.append(f'<circle cx="{x + bar_w * 0.45:.1f}" cy="{cy:.1f}" r="5" '
                       f'fill="white" stroke="{COLORS[store]}" stroke-width="2.5"/>')
    for si, store in enumerate(stores):
        x = left + 10 + 150 * si
        out.append(f'<rect x="{x}" y="{height - 18}" width="12" height="12" '
                   f'fill="{COLORS[store]}"/>')
        out.append(f'<text x="{x + 16}" y="{height - 8}">{STORE_NAMES[store]}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def _table(rows: list[dict[str, Any]], with_fault: bool = False) -> list[str]:
    head = ["store", "hosts x processes", "jobs"]
    if with_fault:
        head.append("fault")
    head += ["pushed/s", "ran/s", "store CPU", "machine busy", "missing", "ran twice",
             "failed"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        cells = [STORE_NAMES[r["store"]], f"{r['hosts']} x 4", f"{r['jobs']:,}"]
        if with_fault:
            cells.append(r["fault_note"])
        cells += [f"{r['push_per_s']:,}" if r["push_per_s"] else "-",
                  f"{r['jobs_per_s']:,}" if r["jobs_per_s"] else "-",
                  f"{r['store_cpu_pct']}%", f"{r['machine_busy_pct']}%",
                  str(r["missing"]), str(r["ran_twice"]), str(r["failed"])]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def _failover(data: dict[str, Any]) -> list[str]:
    """The Redis failover section, from `python -m bench.hosts.failover`'s JSON."""
    costs = [r for r in data["results"] if r["measure"] == "push cost"]
    losses = [r for r in data["results"] if r["measure"] == "failover"]
    md = [
        "## Redis failover",
        "",
        f"Measured {data['started']} by `python -m bench.hosts.failover`: a primary, a "
        "replica and a Sentinel (`down-after-milliseconds 1000`) on this machine. Four "
        "pushers push single jobs as fast as they can and write down each push Redis "
        "acknowledged; the primary is SIGKILLed under them, with the replica in step "
        "or 0.5 s behind (paused that long first, as a replica behind a slow link or "
        "disk is); once the replica is promoted they push on for 2 s, then workers "
        "drain the queue. An acknowledged push whose job never ran was lost.",
        "",
        "| replica behind by | LATERITE_QUEUE_REDIS_WAIT | pushes acknowledged | "
        "failover (s) | acknowledged and lost | not confirmed (PushNotReplicated) | "
        "of those, lost |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in losses:
        behind = f"{r['replica_lag']:g} s (paused)" if r.get("replica_lag") else "in step"
        md.append(f"| {behind} | {r['redis_wait'] or 'off'} | {r['pushed_acked']:,} | "
                  f"{r['failover_seconds']} | {r['acked_lost']} | "
                  f"{r['push_unconfirmed']} | {r['unconfirmed_lost']} |")
    md += [
        "",
        "A killed primary loses what it had not yet handed to the kernel for the "
        "replica: nothing while the replica keeps up, and up to everything acknowledged "
        "in the lag once Redis's own buffer for the replica holds writes the socket "
        "could not take (a crash of the whole machine would lose the kernel's buffers "
        "too). With LATERITE_QUEUE_REDIS_WAIT no acknowledged push was lost. The pushes "
        "it reported not confirmed are those made after the failover, while the "
        "promoted primary had no replica yet (the old primary was not brought back): "
        "each waited 0.5 s and raised PushNotReplicated; they were on the primary and "
        "ran.",
        "",
        "What the safe option costs, pushing to a primary whose replica is on the same "
        "machine (a replica across a network adds its round trip to each push call):",
        "",
        "| LATERITE_QUEUE_REDIS_WAIT | single pushes/s | p50 | p99 | jobs/s in "
        "`push_many` of 1,000 |",
        "|---|---|---|---|---|",
    ]
    for r in costs:
        md.append(f"| {r['redis_wait'] or 'off'} | {r['single_pushes_per_s']:,} | "
                  f"{r['single_p50_ms']} ms | {r['single_p99_ms']} ms | "
                  f"{r['batched_jobs_per_s']:,} |")
    return [*md, ""]


def _store_ms_per_1000(row: dict[str, Any]) -> float:
    """CPU milliseconds the store spent per 1,000 jobs drained (their claims and
    deletions; the pushes came before, and are not counted)."""
    return row["store_cpu_pct"] / 100 * row["drain_seconds"] / row["jobs"] * 1_000_000


def _reading(rows: list[dict[str, Any]]) -> list[str]:
    """What the scale table says: where the limit is, and the store's cost per job."""
    if not rows:
        return []
    lines = []
    for store in STORE_NAMES:
        mine = [r for r in rows if r["store"] == store]
        if not mine:
            continue
        ms = sorted(_store_ms_per_1000(r) for r in mine)[len(mine) // 2]
        busiest = max(r["store_cpu_pct"] for r in mine)
        lines.append(
            f"- {STORE_NAMES[store]}: {ms:.0f} ms of the store's CPU per 1,000 jobs "
            f"drained (claimed and deleted; median over the rows), at most "
            f"{busiest:.0f}% of one core during a drain: one core of store CPU would "
            f"drain about {1_000_000 / ms:,.0f} jobs/s"
            + (" (Redis runs commands on one thread: that is its ceiling for one "
               "primary)." if store == "redis" else ".")
        )
    busy = min(r["machine_busy_pct"] for r in rows)
    return [
        f"Reading it: the machine is at least {busy:.0f}% busy in every row, and the "
        "store uses a fraction of one core: on this machine the worker processes "
        "themselves (Python running and settling each job) are the limit, so more "
        "simulated hosts add processes competing for the same cores, not capacity. "
        "On separate machines the hosts' CPU grows with them and the store becomes "
        "the limit at the rate its CPU allows:",
        "",
        *lines,
        "",
    ]


def write(out: Path, started: str, results: list[dict[str, Any]]) -> None:
    """Write OUT.md, OUT.svg and OUT.json."""
    out.with_suffix(".json").write_text(json.dumps({"started": started, "results": results},
                                                   indent=1))
    out.with_suffix(".svg").write_text(svg(results))
    scale = _scale_rows(results)
    slow = [r for r in results if r.get("slow_every") and not r.get("fault")]
    faults = [r for r in results if r.get("fault")]
    cpu = psutil.cpu_count()
    md = [
        "# Many hosts, one store: figures",
        "",
        f"Measured {started} by `python -m bench.hosts` (bench/hosts/run.py) on "
        f"{cpu} cores ({platform.machine()}, Linux {platform.release()}), PostgreSQL 15 "
        f"and Redis 7 of the harness's own, on a bridge that simulated hosts (network "
        f"namespaces) reach over veth links. Each host runs `queue_work --processes 4`. "
        f"The hosts share this machine's {cpu} cores with the store and the pushers: the "
        f"figures show where the work goes (the store's CPU beside the rate), not what "
        f"{max([r['hosts'] for r in results] + [1]) * 4} processes on separate machines "
        f"would reach. The machine may be shared with other work while it runs: compare "
        f"the rows of one run with each other, not with another run's.",
        "",
        "\"ran/s\" counts the jobs run per second between the first and the last one "
        "finished; \"store CPU\" is the CPU time of the store's processes over the "
        "drain, in % of one core; \"machine busy\" is the whole machine's. Every job "
        "writes its number to a file of its process's own: \"missing\" counts jobs "
        "pushed and acknowledged that never ran, \"ran twice\" the ones that ran more "
        "than once. \"PostgreSQL via PgBouncer\" is the database store through "
        "PgBouncer in transaction pooling mode (statements unprepared, idle workers "
        "listening on a direct connection): its store CPU is PostgreSQL's and "
        "PgBouncer's together.",
        "",
        f"![jobs/s and store CPU by hosts]({out.name}.svg)",
        "",
        "## No-op jobs, 1 to 4 hosts",
        "",
        *_table(scale),
        "",
        *_reading(scale),
    ]
    if slow:
        md += ["## A slow mix (every 100th job sleeps 0.1 s)", "", *_table(slow), ""]
    if faults:
        md += [
            "## Faults under 4 hosts",
            "",
            "Jobs of 2 ms each; the fault comes once a quarter of them ran. retry_after "
            "is 10 s. The documented bound: a job runs twice only if it was in the hands "
            "of a worker that was cut off or killed (at most 20 finished jobs per worker "
            "process: 80 for a host of 4), or if the store lost its claim or deletion in a "
            "crash (PostgreSQL commits claims and deletions without waiting for the WAL "
            "flush: what the last moment before an immediate stop committed may be lost).",
            "",
            *_table(faults, with_fault=True),
            "",
        ]
    failover_path = out.parent / f"{out.name}-failover.json"
    if failover_path.exists():
        md += _failover(json.loads(failover_path.read_text()))
    md.append(f"Raw figures: [{out.name}.json]({out.name}.json)"
              + (f", [{failover_path.name}]({failover_path.name})"
                 if failover_path.exists() else "") + ".")
    out.with_suffix(".md").write_text("\n".join(md) + "\n")


if __name__ == "__main__":  # redraw from the JSON: python -m bench.hosts.report bench/results/scale
    base = Path(os.sys.argv[1])
    data = json.loads(base.with_suffix(".json").read_text())
    write(base, data["started"], data["results"])
