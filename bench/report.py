"""Turn the figures of a run into tables (Markdown, also printed). Stdlib only."""

from bench.systems import SYSTEMS, VARIANT_ROWS, system

__all__ = [
    "COLUMNS",
    "REF_COLUMNS",
    "SCENARIO_KEYS",
    "markdown",
    "ratio_tables",
    "ref_history_entry",
    "ref_ratios",
    "scenario_sections",
    "table_rows",
    "value",
]

# key, heading, higher is better
COLUMNS = [
    ("push_one", "push one /s", True),
    ("push_bulk", "push bulk /s", True),
    ("drain_1", "drain 1 proc /s", True),
    ("drain_2", "drain 2 procs /s", True),
    ("drain_4", "drain 4 procs /s", True),
    ("p50", "push-to-start p50 ms", False),
    ("p95", "push-to-start p95 ms", False),
]
FLOORS = {"PostgreSQL": "floor_pg", "Redis": "floor_redis"}
# The figures compared between this tree and an earlier commit (--ref).
REF_COLUMNS = ["drain_1", "drain_2", "drain_4", "push_one", "push_bulk", "p50"]
NOISE = 0.15  # a current / earlier ratio further than this from 1 is marked
# What bench/scenarios.py adds to a system's result.
SCENARIO_KEYS = ("churn", "backlog", "idle", "flow")


def value(result, key):
    """Return the median figure `key` of one system's result, or None."""
    if not result:
        return None
    if key in ("p50", "p95"):
        return (result.get("latency") or {}).get(key)
    fig = result.get(key)
    return fig["median"] if fig else None


def _fmt(v, key):
    if v is None:
        return "-"
    if key in ("p50", "p95"):
        return f"{v:,.1f}" if v < 100 else f"{v:,.0f}"
    return f"{v:,.0f}"


def _ratio(v, ref, higher):
    if v is None or not ref:
        return None
    return v / ref if higher else ref / v


def _fmt_ratio(r):
    if r is None:
        return "-"
    return f"{r:.2f}x" if r < 10 else f"{r:.0f}x"


def table_rows(results):
    """[(description, result)] in table order; an earlier commit's row follows its own."""
    later = {}
    for name in results:
        if name not in SYSTEMS:
            try:
                desc = system(name)
            except KeyError:
                continue
            later.setdefault(desc.base, []).append(desc)
    out = []
    for name in SYSTEMS:
        if name in results:
            out.append((SYSTEMS[name], results[name]))
        out += [(d, results[d.name]) for d in sorted(later.get(name, []), key=lambda d: d.name)]
    return out


def ref_ratios(results):
    """Return [(current desc, earlier desc, {key: current / earlier})] for each --ref row."""
    out = []
    for desc, res in table_rows(results):
        if not desc.ref or res.get("failed") or results.get(desc.base, {}).get("failed"):
            continue
        cur = results.get(desc.base)
        if cur is None:
            continue
        ratios = {}
        for key in REF_COLUMNS:
            a, b = value(cur, key), value(res, key)
            ratios[key] = a / b if a is not None and b else None
        out.append((SYSTEMS[desc.base], desc, ratios))
    return out


def ref_history_entry(results, names, meta_entry):
    """What a run that measured `names` adds to meta["ref_history"]: current / earlier ratios."""
    ratios = {
        ref.name: {k: None if r is None else round(r, 3) for k, r in rs.items()}
        for _, ref, rs in ref_ratios(results)
        if ref.name in names and ref.base in names
    }
    return dict(meta_entry, ratios=ratios) if ratios else None


def _ref_heads():
    heads = dict((k, h) for k, h, _ in COLUMNS)
    return [heads[k].replace(" /s", "").replace("push-to-start ", "") for k in REF_COLUMNS]


def _ref_cell(r, text=None):
    if r is None:
        return "-"
    cell = f"{r:.2f}" + (f" ({text})" if text else "")
    return f"**{cell}**" if abs(r - 1) > NOISE else cell


def _ref_history(meta):
    """Each run of the comparison so far, as a table, oldest first."""
    history = meta.get("ref_history") or []
    if len(history) < 2:
        return []
    lines = []
    for h in history:
        for i, (name, ratios) in enumerate(sorted(h["ratios"].items())):
            how = f"`{h['command']}`" + (f" ({h['note']})" if h.get("note") else "")
            lines.append(
                [h["date"], h["load_start"].split()[0], name.partition("@")[0]]
                + [_ref_cell(ratios.get(k)) for k in REF_COLUMNS]
                + [how if i == 0 else "〃"]
            )
    return [
        "Every run of this comparison kept in this report (the table above is the"
        " last one; load: the 1-minute load average at its start). How far one"
        " figure moves from run to run is the noise to read the ratios against.",
        "",
        _table(["date", "load", "row", *_ref_heads(), "command"], lines),
        "",
    ]


VARIANT_COLUMNS = ["drain_1", "drain_2", "drain_4"]


def _variants_section(results):
    """The drains of each variant row (VARIANT_ROWS) divided by its base row's."""
    lines = []
    for name, (base, what) in VARIANT_ROWS.items():
        a, b = results.get(name), results.get(base)
        if not a or not b or a.get("failed") or b.get("failed"):
            continue
        cells = [SYSTEMS[base].store, what, f"{name} / {base}"]
        for key in VARIANT_COLUMNS:
            x, y = value(a, key), value(b, key)
            cells.append(f"{x / y:.2f} ({_fmt(x, key)} / {_fmt(y, key)})" if x and y else "-")
        lines.append(cells)
    if not lines:
        return []
    heads = [h for k, h, _ in COLUMNS if k in VARIANT_COLUMNS]
    return [
        "## Variants against their base rows",
        "",
        "Drains of laterite with its workers serving Prometheus metrics (`queue_work"
        " --metrics-port 0`), and of the same jobs pushed as one `batch()`, divided by"
        " the plain drains; each variant and its base row measured in alternating"
        " rounds of the same run.",
        "",
        _table(["store", "what", "rows", *heads], lines),
        "",
    ]


def _ref_section(results, meta):
    pairs = ref_ratios(results)
    if not pairs:
        return []
    head = ["store", "rows", *_ref_heads()]
    lines = []
    for cur, ref, ratios in pairs:
        cells = [cur.store, f"{cur.name} / {ref.name}"]
        for key in REF_COLUMNS:
            r = ratios[key]
            if r is None:
                cells.append("-")
                continue
            a, b = value(results[cur.name], key), value(results[ref.name], key)
            cells.append(_ref_cell(r, f"{_fmt(a, key)} / {_fmt(b, key)}"))
        lines.append(cells)
    tree = meta.get("tree")
    for m in reversed(meta.get("merged", [])):
        if any("@" in name for name in m["systems"]):
            tree = m.get("tree")
            break
    return [
        "## Against an earlier commit",
        "",
        f"The current rows ({tree or 'this working tree'}) divided by the same rows"
        " measured on an earlier commit of laterite (`--ref`), in the same run: a row"
        " and its earlier commit's row ran in alternating rounds of one repetition"
        " each (current, earlier; earlier, current; current, earlier; ...), the"
        " figure being the median over the rounds, so load from other work falls on"
        " both alike. Same bench code, settings and workload; the earlier one runs"
        " from its own virtualenv (`bench/.venvs/laterite-<commit>`, the package"
        " installed from `git archive <commit>`), on its own database or Redis db,"
        " migrated by that commit's migrations. Above 1 is faster now for the"
        " rates; for p50 (a time) below 1 is faster now. Bold: more than"
        f" {NOISE:.0%} from 1.",
        "",
        _table(head, lines),
        "",
        *_ref_history(meta),
    ]


def best_peer(results, store, key, higher):
    vals = [
        value(res, key)
        for desc, res in table_rows(results)
        if desc.kind == "peer" and desc.store == store and not res.get("failed")
    ]
    vals = [v for v in vals if v is not None]
    if not vals:
        return None
    return max(vals) if higher else min(vals)


def ratio_tables(results):
    """Return {name: {key: (vs floor, vs best peer)}}."""
    out = {}
    for desc, res in table_rows(results):
        row = {}
        for key, _, higher in COLUMNS:
            v = value(res, key)
            floor = FLOORS.get(desc.store)
            ref_floor = value(results.get(floor), key) if floor else None
            # SQLite has no peer here: compare it with the best PostgreSQL peer.
            peer_store = desc.store if desc.store != "SQLite" else "PostgreSQL"
            ref_peer = best_peer(results, peer_store, key, higher)
            row[key] = (_ratio(v, ref_floor, higher), _ratio(v, ref_peer, higher))
        out[desc.name] = row
    return out


def _table(head, rows):
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def _label(desc, res):
    label = desc.label
    if desc.kind == "laterite" and desc.ref:
        label = f"**laterite_django** at {desc.ref}"
    elif desc.kind == "laterite":
        label = f"**{label}**"
    return label


def markdown(run):
    """Return the Markdown report of `run` (the JSON that bench/run.py writes)."""
    results = run["results"]
    meta = run["meta"]
    scale_only = not any(value(r, k) is not None for r in results.values() for k, _, _ in COLUMNS)
    out = [
        "# Benchmarks" + (": scale scenarios" if scale_only else ""),
        "",
        "Made by `python bench/run.py` (see `bench/README.md`): every system below was"
        " measured in the same run, on the same machine, "
        + ("in alternating rounds of one repetition each (a b c, c b a, ...)."
           if meta.get("alternate") else "one after the other."),
        "",
        f"- date: {meta['date']}",
        f"- machine: {meta['nproc']} cores ({meta['cpu']}), {meta['memory']}, {meta['os']}",
        f"- load average: {meta['load_start']} at the start, {meta['load_end']} at the end"
        " (a shared machine: other work ran beside the bench)",
        f"- Python {meta['python']}; PostgreSQL {meta.get('postgresql', '?')}"
        f" and Redis {meta.get('redis', '?')} on 127.0.0.1",
        f"- workload: N = {meta['n']} no-op jobs; medians of {meta['repeat']} repetitions;"
        f" latency from {meta['latency_samples']} pushes, one at a time, to an idle worker"
        + (f"; push one: at least N pushes and {meta['push_seconds']:g} s of pushing"
           " per repetition" if meta.get("push_seconds") else ""),
        f"- command: `{meta['command']}`",
    ]
    if meta.get("own_postgres"):
        out.append(f"- PostgreSQL server: {meta['own_postgres']}")
    if meta.get("tree"):
        out.append(f"- laterite: {meta['tree']}")
    for m in meta.get("merged", []):
        tree = f"; laterite: {m['tree']}" if m.get("tree") else ""
        if m.get("cpu", meta["cpu"]) != meta["cpu"]:
            # A shared host may move to another machine between runs.
            tree += f"; on {m['nproc']} cores ({m['cpu']})" if m.get("nproc") else f"; {m['cpu']}"
        out.append(
            f"- re-measured on {m['date']} (load {m['load_start']}{tree}) with"
            f" `{m['command']}`: {', '.join(m['systems'])}"
        )
    out.append("")
    figures = [
        (d, r)
        for d, r in table_rows(results)
        if r.get("failed") or any(value(r, k) is not None for k, _, _ in COLUMNS)
    ]
    notes = []
    if figures:
        out += _figures(results, meta, figures, notes)
    else:
        for desc, res in table_rows(results):
            if res.get("failed"):
                notes.append(f"- {desc.name}: failed: {res['failed']}")
            notes += [f"- {desc.name}: {x}" for x in res.get("errors", []) + res.get("notes", [])]
    out += scenario_sections(results, meta)
    if figures:
        out += _how(meta)
        out += _apart(meta)
    out += ["## Versions", ""]
    for desc, res in table_rows(results):
        v = res.get("versions") or {}
        if v:
            out.append(f"- {desc.name}: " + ", ".join(f"{k} {x}" for k, x in v.items()))
    if notes:
        out += ["", "## Notes and errors", "", *notes]
    out.append("")
    return "\n".join(out)


def _figures(results, meta, figures, notes):
    """The table's figures and their ratios."""
    out = ["## Figures", ""]
    head = ["system", "store"] + [h for _, h, _ in COLUMNS] + ["load"]
    rows = []
    for desc, res in figures:
        if res.get("failed"):
            rows.append([_label(desc, res), desc.store, f"failed: {res['failed']}"] + [""] * 7)
            continue
        cells = [_label(desc, res), desc.store]
        for key, _, _ in COLUMNS:
            cell = _fmt(value(res, key), key)
            if key == "push_bulk" and cell != "-" and res.get("has_bulk") is False:
                cell += " †"
            cells.append(cell)
        load = res.get("load") or []
        cells.append(" → ".join(x.split()[0] for x in load) if load else "-")
        rows.append(cells)
        for e in res.get("errors", []):
            notes.append(f"- {desc.name}: {e}")
        for n in res.get("notes", []):
            notes.append(f"- {desc.name}: {n}")
        caps = {k: v for k, v in (res.get("drain_n") or {}).items() if v != meta["n"]}
        if caps:
            notes.append(f"- {desc.name}: drains measured on N = {sorted(set(caps.values()))[0]}")
    out.append(_table(head, rows))
    out += [
        "",
        "† no bulk path in this system: the figure is a loop of single pushes."
        " load: the machine's 1-minute load average before → after the system ran"
        f" ({meta['nproc']} cores; above that, other work competed for them).",
        "",
    ]
    out += _ref_section(results, meta)
    out += _variants_section(results)
    out += [
        "## Ratios",
        "",
        "Each figure divided by the reference's (for latency, the reference's divided"
        " by the figure's), so above 1 is better than the reference. The floor is the"
        " one-job-per-round-trip floor of the same store (`DELETE ... SKIP LOCKED` for"
        " PostgreSQL, `LMOVE` for Redis); the best peer is the best of Procrastinate,"
        " pgqueuer, django-q2 and django-tasks-db (PostgreSQL) or of Huey, RQ and Celery"
        " (Redis) in that column. SQLite is compared with the best PostgreSQL peer.",
        "",
    ]
    ratios = ratio_tables(results)
    head = ["system", "store"] + [h.replace(" /s", "").replace(" ms", "") for _, h, _ in COLUMNS]
    rows = []
    for desc, res in table_rows(results):
        if res.get("failed") or (desc.kind == "floor" and desc.name in FLOORS.values()):
            continue
        cells = [_label(desc, res), desc.store]
        for key, _, _ in COLUMNS:
            vs_floor, vs_peer = ratios[desc.name][key]
            cells.append(f"{_fmt_ratio(vs_floor)} / {_fmt_ratio(vs_peer)}")
        rows.append(cells)
    out += ["Cells: against the floor / against the best peer.", "", _table(head, rows), ""]
    return out


def _how(meta):
    return [
        "## How it is measured",
        "",
        "- Each system runs in its own virtualenv (`bench/.venvs/<name>`), installed by"
        " the script with pip, on its own database (`bench_<system>`) or Redis db.",
        "- A job records its start with one `os.write` of `id pid time.time()` to a file"
        " (`bench/systems/_record.py`): the same cost in every system.",
        "- push one: N pushes in a loop from one process; push bulk: the system's bulk"
        " call with all N jobs (a loop where it has none).",
        "- drain: the workers are started and left to go idle, then paused (SIGSTOP);"
        " N jobs are pushed; the workers resume (SIGCONT). The figure is (N - 1) /"
        " (last job start - first job start): start-up is not counted. Each worker"
        " process runs one job at a time (Celery solo pool, Procrastinate concurrency 1,"
        " Huey and django-q2 with n worker processes, laterite `--processes n`).",
        "- push-to-start: from just before the push call to the job's start, one job at"
        " a time, on an idle single worker; pushes are 20-40 ms apart plus, for a system"
        " that polls, a random part of its idle poll interval (django-q2 0.2 s,"
        " django-tasks-db 1 s or 0.1 s tuned), so a poller is caught at a random point"
        " of its sleep. An idle laterite worker polls no store: the push wakes it.",
        "- PostgreSQL: tables are truncated before each figure and the database is"
        " vacuumed before each drain repetition (autovacuum is off on this machine), so"
        " every repetition starts from the same tables.",
        "- the floors are bench/systems/floor_worker.py: no library, one claim"
        " statement, JSON decode, run, settle.",
        "",
        f"![benchmarks]({meta.get('png_name', 'benchmarks.png')})",
        "",
    ]


# The reports of the runs the table above does not hold (bench/results/), and what each measures.
APART = [
    ("benchmarks-scale-churn.md", "dead tuples: drains after 10^6 jobs were cleared and after"
     " 10^6 ran through, no VACUUM in between, against the fresh table's (laterite alone)"),
    ("benchmarks-scale-churn-peers.md", "the same beside pgqueuer and the floor"),
    ("benchmarks-scale-autovacuum.md", "the same on a cluster of the run's own with"
     " autovacuum at its defaults (laterite alone)"),
    ("benchmarks-scale-autovacuum-peers.md", "that, beside pgqueuer and the floor"),
    ("benchmarks-scale-backlog.md", "push one, drain and push-to-start with 10^4 and 10^6"
     " jobs already waiting, delayed or failed (PostgreSQL)"),
    ("benchmarks-scale-backlog-redis.md", "the same on Redis, beside Huey"),
    ("benchmarks-scale-idle.md", "what 8 idle worker processes cost: CPU and queries"),
    ("benchmarks-batch1.md", "`queue_work --batch 1` against the UPDATE-then-DELETE floor"),
    ("benchmarks-flow.md", "drains under a per-key limit and a queue concurrency"),
    ("benchmarks-workflows.md", "a 10,000-job `batch()` against the plain drain"),
    ("benchmarks-xeon.md", "the table on an Intel Xeon"),
    ("benchmarks-alternate.md", "an earlier table, its rows in alternating rounds"),
    ("profile.md", "where a worker's time goes, per drained job"),
]


def _apart(meta):
    """Links to the reports of the runs this one does not hold, those present in bench/results/."""
    from pathlib import Path

    docs = Path(__file__).resolve().parent / "results"
    own = meta.get("png_name", "benchmarks.png").removesuffix(".png") + ".md"
    found = [(name, what) for name, what in APART if name != own and (docs / name).exists()]
    if not found:
        return []
    return [
        "## Measured apart",
        "",
        "Runs of `bench/run.py --scenarios ...` and of the profilers (`bench/README.md`),"
        " each with its own date, machine, figures and chart, in bench/results/:",
        "",
        *(f"- [{name}]({name}): {what}" for name, what in found),
        "",
    ]


def _n(x):
    """10000 -> 10^4, 20000 -> 2*10^4, other numbers with separators."""
    if x >= 1000:
        exp = len(str(x)) - 1
        lead, rest = divmod(x, 10**exp)
        if not rest:
            return f"10^{exp}" if lead == 1 else f"{lead}*10^{exp}"
    return f"{x:,}"


def _rate(x):
    return "-" if x is None else f"{x:,.0f}"


def _ms(x):
    return "-" if x is None else (f"{x:,.1f}" if x < 100 else f"{x:,.0f}")


def _x(a, b):
    if a is None or not b:
        return "-"
    r = a / b
    return f"{r:.2f}" if r >= 0.1 else f"{r:.2g}"


def _churn_section(results, meta):
    rows = []
    for desc, res in table_rows(results):
        c = res.get("churn")
        if not c or not c.get("fresh"):
            continue
        fresh = c["fresh"]["median"]
        cells = [_label(desc, res), _rate(fresh)]
        for key in ("cleared", "ran"):
            fig = c.get(key)
            v = fig["median"] if fig else None
            ratio = f"{fig['vs_fresh']:.2f}" if fig and "vs_fresh" in fig else _x(v, fresh)
            cells += [_rate(v), f"**{ratio}**"]
        dead = [c.get(k, {}).get("dead_tuples") for k in ("fresh", "cleared", "ran")]
        cells.append(" / ".join("-" if d is None else f"{d:,}" for d in dead))
        cells.append(_rate(c["b_ran"] / c["ran_s"]) if c.get("ran_s") else "-")
        rows.append(cells)
    if not rows:
        return []
    first = next(r["churn"] for r in results.values() if (r.get("churn") or {}).get("fresh"))
    b, b_run = _n(first["b_cleared"]), _n(first["b_ran"])
    return [
        "## Dead tuples (PostgreSQL)",
        "",
        "The drain with 1 process of N fresh jobs on tables that churn has left"
        " dead tuples in, with no VACUUM in between ("
        + ("autovacuum on, at its defaults: the run's own cluster" if meta.get("own_postgres")
           else "autovacuum is off on this machine")
        + "), divided by the same row's drain on fresh, vacuumed tables in the"
        " same run (measured just before and just after each churned drain, the"
        " ratio is to the geometric mean of those two; the fresh column is the"
        f" median of all three): (a) after {b} jobs were pushed in bulk and cleared (laterite:"
        " `store.clear()`, what `queue_clear` runs; pgqueuer: `clear_queue('noop')`,"
        " its DELETE; the floor: `DELETE FROM floor_job`); (b) after"
        f" {b_run} jobs ran through {first.get('procs', 2)} worker processes."
        " Whatever the system itself does about dead tuples in between is part of"
        " the figure. Dead tuples: `pg_stat_user_tables.n_dead_tup` of the"
        " database's tables just before each drain. Last column: the rate at which"
        f" the {b_run} jobs of (b) were pushed (in bulk) and ran, start to end.",
        "",
        _table(
            [
                "system",
                "fresh drain /s",
                f"after {b} cleared /s",
                "cleared / fresh",
                f"after {b_run} ran /s",
                "ran / fresh",
                "dead tuples: fresh / cleared / ran",
                f"running the {b_run} /s",
            ],
            rows,
        ),
        "",
    ]


def _backlog_section(results, meta):
    rows = []
    summary = []
    for desc, res in table_rows(results):
        bl = res.get("backlog")
        if not bl or not bl.get("rows"):
            continue
        for r in bl["rows"]:
            what = f"{_n(r['size'])} {r['kind']}"
            rows.append(
                [
                    _label(desc, res),
                    desc.store,
                    what,
                    _rate(r.get("push_one")),
                    _rate(r.get("drain")),
                    _ms(r.get("p50")),
                    _ms(r.get("p95")),
                ]
            )
        waiting = [r for r in bl["rows"] if r["kind"] == "waiting"]
        if len(waiting) > 1:
            lo, hi = waiting[0], waiting[-1]
            p50 = _x(lo.get("p50"), hi.get("p50"))  # a time: low / high, above 1 is faster
            summary.append(
                [
                    _label(desc, res),
                    desc.store,
                    f"{_n(hi['size'])} / {_n(lo['size'])}",
                    f"**{_x(hi.get('drain'), lo.get('drain'))}**",
                    _x(hi.get("push_one"), lo.get("push_one")),
                    "-" if p50 == "-" else f"{_x(hi.get('p50'), lo.get('p50'))}",
                ]
            )
    if not rows:
        return []
    return [
        "## Backlog",
        "",
        "The same figures with a backlog already in the store, one worker process."
        " *waiting*: push one is N single pushes into the queue the worker serves,"
        " behind the backlog (workers paused); drain is the rate of the backlog's"
        " own first N jobs, the worker resumed in front of all of them (start-up not"
        " counted, the store vacuumed first as for the table's drains); push-to-start"
        " has the backlog waiting where the idle worker does not look (laterite: a"
        " queue it does not serve; pgqueuer: an entrypoint it does not register;"
        " Huey, whose Redis queue is one list, another Huey's list on the same db),"
        " so the pushed job is the next it takes. *delayed* (due in a day, in the"
        " served queue) and *failed* (rows of laterite's failed list): N fresh jobs,"
        " measured as in the table. Backlogs are made with the system's bulk push"
        " (Huey: the messages its enqueue writes, LPUSHed in pipelines; failed rows:"
        " one INSERT).",
        "",
        _table(
            [
                "system",
                "store",
                "backlog",
                "push one /s",
                "drain 1 proc /s",
                "push-to-start p50 ms",
                "p95 ms",
            ],
            rows,
        ),
        "",
        *(
            [
                "Largest waiting backlog against the smallest, same row, same run: rates"
                " divided (below 1: slower with the larger backlog); push-to-start p50"
                " as large / small (above 1: slower).",
                "",
                _table(
                    ["system", "store", "backlogs", "drain", "push one", "push-to-start p50"],
                    summary,
                ),
                "",
            ]
            if summary
            else []
        ),
    ]


def _idle_section(results, meta):
    rows = []
    for desc, res in table_rows(results):
        idle = res.get("idle")
        if not idle:
            continue
        pg = idle.get("pg")
        per_min = 60.0 / pg["seconds"] if pg and pg.get("seconds") else None
        cmds = idle.get("redis_commands")
        if cmds is None:
            redis_cell = "-"
        else:
            total = sum(cmds.values()) * 60.0 / idle["seconds"]
            top = sorted(cmds.items(), key=lambda kv: -kv[1])[:3]
            redis_cell = f"{total:,.0f}" + (
                " (" + ", ".join(f"{k} {v * 60.0 / idle['seconds']:,.0f}" for k, v in top) + ")"
                if top
                else ""
            )
        rows.append(
            [
                _label(desc, res),
                desc.store,
                f"{idle['processes']} ({idle['tree_processes']})",
                f"{idle['cpu_pct']:.2f}",
                "-" if not per_min else f"{pg['xacts'] * per_min:,.0f}",
                "-" if not per_min else f"{pg['table_scans'] * per_min:,.0f}",
                "-" if not pg or "sessions" not in pg
                else f"{pg['querying_sessions']} of {pg['sessions']}",
                redis_cell,
            ]
        )
    if not rows:
        return []
    return [
        "## Idle workers",
        "",
        f"`queue_work --processes {_first_idle(results)['processes']}`"
        " started, warmed up with a few jobs and left idle (nothing pushed) for 35 s"
        " before the window (past the first 30 s wake-up of a worker that went idle"
        " while a warm-up job was still claimed by another);"
        f" over {meta.get('idle_seconds', 30):.0f} s: the CPU time of the whole"
        " process tree (supervisor and workers, from /proc) as % of one core; the"
        " transactions of its PostgreSQL database (`pg_stat_database` xact_commit +"
        " xact_rollback) and the scans of its tables (`pg_stat_user_tables` seq_scan +"
        " idx_scan; pg_stat_statements is not loaded on this server; both reported by"
        " each backend up to 10 s late, so they also count what the bench's own"
        " sessions did just before); how many of the database's sessions started a"
        " query in the window (`pg_stat_activity.query_start`, live); the commands"
        " sent to its Redis db, counted with MONITOR (INFO commandstats counts the"
        " whole server, which other work shares). SQLite: CPU only.",
        "",
        _table(
            [
                "system",
                "store",
                "processes (in tree)",
                "CPU % of a core",
                "PostgreSQL transactions /min",
                "table scans /min",
                "sessions that sent a query",
                "Redis commands /min (most sent)",
            ],
            rows,
        ),
        "",
    ]


def _first_idle(results):
    return next(r["idle"] for r in results.values() if r.get("idle"))


def scenario_sections(results, meta):
    """The Markdown of the scale scenarios (bench/scenarios.py), where measured."""
    out = _churn_section(results, meta) + _backlog_section(results, meta)
    out += _idle_section(results, meta)
    flow = _flow_section(results)
    if out:
        png = meta.get("png_name", "benchmarks.png")
        if any(value(r, k) is not None for r in results.values() for k, _, _ in COLUMNS):
            png = png.removesuffix(".png") + "-scale.png"  # as bench.chart.scale_png
        out += [f"![scale]({png})", ""]
    return out + flow


def _flow_section(results):
    """The limited drains beside the unlimited one (bench/scenarios.py `flow`)."""
    rows = []
    for desc, res in table_rows(results):
        flow = res.get("flow")
        if not flow or not flow.get("unlimited"):
            continue
        base = flow["unlimited"]["median"]
        cells = [_label(desc, res), desc.store, f"{base:,.0f}"]
        for mode in ("keyed", "queue", "fair"):
            fig = flow.get(mode)
            cells.append("-" if not fig else f"{fig['median']:,.0f} ({fig['median'] / base:.2f}x)")
        rows.append(cells)
    if not rows:
        return []
    first = next(r["flow"] for r in results.values() if r.get("flow"))
    return [
        "## Flow control: limited drains",
        "",
        f"The drain of N jobs by `queue_work --processes {first['processes']}`: with no"
        " limit; with `@job(concurrency=1, concurrency_key=...)` over"
        f" {first['keys']} keys (job i has key i mod {first['keys']}); with"
        f" `LATERITE_QUEUE_LIMITS = {{\"default\": {{\"concurrency\": {first['concurrency']}}}}}`"
        f" (the batch claim is {first['batch']}); and fair, a job with `fair_key` over"
        f" {first['keys']} keys, served in turn. The four are measured in alternating"
        " rounds (one drain each, workers started afresh for each), medians over the"
        " rounds; the ratios are to the unlimited drain of the same run.",
        "",
        _table(["system", "store", "unlimited jobs/s", "per-key limit jobs/s",
                "queue limit jobs/s", "fair jobs/s"], rows),
        "",
    ]
