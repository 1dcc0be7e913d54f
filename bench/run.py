"""Benchmark laterite_django against its peers, each in its own virtualenv.

    python bench/run.py                      # everything, N=2000, medians of 3
    python bench/run.py --quick              # N=500, 1 repetition, 30 latency samples
    python bench/run.py --only huey,laterite_redis --merge
    python bench/run.py --only laterite_pg,floor_pg --ref 2d1d5a0   # laterite at 2d1d5a0 beside it
    python bench/run.py --report-only     # redraw bench/results/ from its benchmarks.json
    python bench/run.py --scenarios scale --out bench/results/benchmarks-scale.md  # churn, ...
    python bench/run.py --only laterite_pg,laterite_redis --scenarios flow  # fair vs unlimited

Writes bench/results/benchmarks.md, benchmarks.png and benchmarks.json.
Needs PostgreSQL (trust auth) and Redis on 127.0.0.1; see bench/README.md.
"""

import argparse
import datetime
import hashlib
import json
import os
import platform
import shlex
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

if __package__ in (None, ""):  # `python bench/run.py`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import report
from bench.driver import PUSH_SECONDS
from bench.systems import (
    REF_BASES,
    REF_PATH,
    ROOT,
    SCALE_SCENARIOS,
    SCENARIO_ROWS,
    SYSTEMS,
    VARIANT_ROWS,
    code_root,
    ref_tree,
    requirements,
    system,
)

__all__ = ["main"]

BENCH = ROOT / "bench"
VENV_DIR = BENCH / ".venvs"
RUN_DIR = BENCH / ".runs"


def say(msg):
    print(msg, file=sys.stderr, flush=True)


def base_python():
    return getattr(sys, "_base_executable", None) or sys.executable


def venv_python(name):
    return VENV_DIR / name / "bin" / "python"


def ensure_venv(name, timeout=900):
    """Create and fill bench/.venvs/<name>; return None or the reason it failed."""
    reqs = requirements(name)
    marker = VENV_DIR / name / ".bench-requirements"
    digest = hashlib.sha256(json.dumps(reqs).encode()).hexdigest()
    editable = "-e" in reqs  # laterite: reinstall each run, its dependencies may change
    if not editable and marker.exists() and marker.read_text() == digest:
        return None
    log = RUN_DIR / f"pip-{name}.log"
    say(f"== installing {name}: {' '.join(reqs)}")
    try:
        if not venv_python(name).exists():
            subprocess.run(
                [base_python(), "-m", "venv", str(VENV_DIR / name)],
                check=True,
                capture_output=True,
                timeout=120,
            )
        with open(log, "w") as f:
            proc = subprocess.run(
                [
                    str(venv_python(name)),
                    "-m",
                    "pip",
                    "install",
                    "--disable-pip-version-check",
                    *reqs,
                ],
                stdout=f,
                stderr=subprocess.STDOUT,
                timeout=timeout,
            )
    except (subprocess.SubprocessError, OSError) as e:
        return f"install: {type(e).__name__}: {e}"[:200]
    if proc.returncode != 0:
        lines = [ln for ln in log.read_text().splitlines() if ln.strip()]
        errors = [ln for ln in lines if "ERROR" in ln] or lines[-1:]
        return f"install: {errors[0].strip() if errors else 'pip failed'}"[:200]
    marker.write_text(digest)
    return None


def git(*args):
    return subprocess.run(
        ["git", *args], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.strip()


def resolve_ref(rev):
    """Return the short hash of commit `rev`, or raise ValueError naming it."""
    try:
        return git("rev-parse", "--short=7", "--verify", "--end-of-options", f"{rev}^{{commit}}")
    except (subprocess.CalledProcessError, OSError) as e:
        raise ValueError(f"--ref {rev!r} is not a commit of this repository") from e


def export_ref(rev):
    """Export commit `rev` to bench/.ref/<rev> (once) and make the path its rows run from."""
    tree = ref_tree(rev)
    if not (tree / "pyproject.toml").exists():
        say(f"== exporting {rev} to {tree.relative_to(ROOT)}")
        tmp = tree.with_name(tree.name + ".tmp")
        subprocess.run(["rm", "-rf", str(tmp)], check=True)
        tmp.mkdir(parents=True)
        archive = subprocess.Popen(["git", "archive", rev], cwd=ROOT, stdout=subprocess.PIPE)
        subprocess.run(["tar", "-x", "-C", str(tmp)], stdin=archive.stdout, check=True)
        archive.stdout.close()
        if archive.wait():
            raise RuntimeError(f"git archive {rev} failed")
        tmp.rename(tree)
    link = REF_PATH / "bench"
    if not link.is_symlink():
        REF_PATH.mkdir(parents=True, exist_ok=True)
        link.symlink_to(BENCH, target_is_directory=True)


def tree_version():
    """This working tree's commit, and whether it has uncommitted changes."""
    try:
        head = git("rev-parse", "--short=7", "HEAD")
        dirty = git("status", "--porcelain", "--untracked-files=no", "--", "laterite_django")
    except (subprocess.CalledProcessError, OSError):
        return "working tree"
    return f"working tree at {head}" + (" with uncommitted changes" if dirty else "")


def port_open(port):
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2):
            return True
    except OSError:
        return False


def machine():
    cpu = "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = "?"
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                mem = f"{int(line.split()[1]) / 1024 / 1024:.0f} GiB memory"
    except OSError:
        pass
    return {
        "nproc": os.cpu_count(),
        "cpu": cpu,
        "memory": mem,
        "os": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
    }


def load():
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def run_system(desc, args, repeat=None):
    """Run bench.driver for one system in its venv; return its result dict."""
    out = RUN_DIR / f"{desc.name}.json"
    out.unlink(missing_ok=True)
    argv = [
        str(venv_python(desc.venv)),
        "-m",
        "bench.driver",
        "--system",
        desc.name,
        "--n",
        str(args.n),
        "--repeat",
        str(repeat or args.repeat),
        "--workers",
        ",".join(map(str, args.workers)),
        "--latency-samples",
        str(args.latency_samples),
        "--run-dir",
        str(RUN_DIR),
        "--out",
        str(out),
        "--scenarios",
        ",".join(args.scenarios),
        "--churn-b",
        str(args.churn_b),
        "--churn-run-b",
        str(args.churn_run_b),
        "--backlog-sizes",
        ",".join(map(str, args.backlog_sizes)),
        "--idle-seconds",
        str(args.idle_seconds),
        "--flow-processes",
        str(args.flow_processes),
        "--flow-keys",
        str(args.flow_keys),
        "--flow-concurrency",
        str(args.flow_concurrency),
    ]
    env = dict(os.environ, PYTHONPATH=str(code_root(desc)), BENCH_TREE=args.tree)
    if args.laterite_args:
        env["BENCH_LATERITE_ARGS"] = args.laterite_args
    log = RUN_DIR / f"{desc.name}.driver.log"
    started = time.monotonic()
    load_before = load()
    reason = None
    with open(log, "w") as f:
        proc = subprocess.Popen(
            argv,
            cwd=code_root(desc),
            env=env,
            stdout=f,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )

        def echo():  # progress lines, shown as they come
            for line in proc.stderr:
                f.write(line)
                f.flush()
                if line.startswith("["):
                    say("   " + line.rstrip())

        reader = threading.Thread(target=echo, daemon=True)
        reader.start()
        try:
            proc.wait(timeout=args.system_timeout)
        except subprocess.TimeoutExpired:
            reason = f"timed out after {args.system_timeout:.0f} s"
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        reader.join(timeout=5)
    result = json.loads(out.read_text()) if out.exists() else {"errors": []}
    if proc.returncode and not reason:
        tail = [ln for ln in log.read_text().splitlines() if ln.strip()]
        reason = f"exit {proc.returncode}: {tail[-1].strip()[:160] if tail else ''}"
    measured = any(report.value(result, k) is not None for k, _, _ in report.COLUMNS) or any(
        result.get(k) for k in report.SCENARIO_KEYS
    )
    if reason:
        result.setdefault("errors", []).append(reason)
        if not measured:
            result["failed"] = reason
    elif not measured:
        errs = result.get("errors") or ["nothing measured"]
        result["failed"] = errs[0]
    result["seconds"] = round(time.monotonic() - started)
    result["load"] = [load_before, load()]
    return result


def combine(parts):
    """Make one result of a system's rounds (one repetition each): medians over all."""
    ok = [p for p in parts if not p.get("failed")]
    if not ok:
        return parts[-1]
    out = {"errors": [], "notes": [], "rounds": len(parts), "drain_n": {}}
    samples = []
    for part in parts:
        for key, val in part.items():
            if key in ("errors", "notes"):
                out[key] += [x for x in val if x not in out[key]]
            elif key == "latency":
                samples += val.get("values", [])
            elif isinstance(val, dict) and "values" in val:
                out.setdefault(key, {"values": [], "unit": val["unit"]})["values"] += val["values"]
            elif key in report.SCENARIO_KEYS and isinstance(val, dict):
                _gather(out.setdefault(key, {}), val)  # a scenario's figures, each pooled
            elif key == "drain_n":
                out[key].update(val)
            elif key == "failed":
                out["errors"].append(f"a round failed: {val}")
            elif key not in ("seconds", "load"):
                out.setdefault(key, val)
    _medians(out)
    if samples:
        q = statistics.quantiles(samples, n=20, method="inclusive") if len(samples) > 1 else None
        out["latency"] = {
            "p50": statistics.median(samples),
            "p95": q[18] if q else samples[0],
            "samples": len(samples),
            "missed": sum((p.get("latency") or {}).get("missed", 0) for p in parts),
            "unit": "ms",
            "values": samples,
        }
    out["seconds"] = sum(p.get("seconds", 0) for p in parts)
    out["load"] = [parts[0]["load"][0], parts[-1]["load"][1]]
    out["round_loads"] = [p["load"] for p in parts]
    return out


def _gather(into, part):
    """Pool the figures of one round's scenario result `part` into `into`: each figure's
    values are added to those of the earlier rounds; anything else is the first round's."""
    for key, val in part.items():
        if isinstance(val, dict) and "values" in val:
            into.setdefault(key, {"values": [], "unit": val.get("unit")})["values"] += val["values"]
        elif isinstance(val, dict) and isinstance(into.get(key, {}), dict):
            _gather(into.setdefault(key, {}), val)
        else:
            into.setdefault(key, val)


def _medians(result):
    """Set the median of every pooled figure in `result`, at any depth."""
    for val in result.values():
        if isinstance(val, dict):
            if val.get("values"):
                val["median"] = statistics.median(val["values"])
            else:
                _medians(val)


def merge_result(old, new, scenarios):
    """A row re-measured with --merge keeps the earlier figures this run did not measure.

    A run of the scale scenarios alone keeps the row's table figures, and the
    scenarios it did not run; a run of the table keeps the row's scenarios.
    """
    if not old or old.get("failed") or new.get("failed"):
        return new
    out = dict(new)
    for key, val in old.items():
        if key in report.SCENARIO_KEYS:
            if key not in scenarios:
                out[key] = val
        elif "figures" not in scenarios and key not in out:
            out[key] = val
    for key in ("errors", "notes"):
        before = list(old.get(key, []))
        out[key] = before + [x for x in new.get(key, []) if x not in before]
    return out


def measure_group(descs, args):
    """Measure rows `descs` in alternating rounds of one repetition each: a b c, c b a,
    a b c, ...

    Load from other work on the machine then falls on all alike, which matters
    more for a ratio between them than for any figure alone.
    """
    parts = {d.name: [] for d in descs}
    for r in range(args.repeat):
        for desc in descs if r % 2 == 0 else descs[::-1]:
            say(f"== {desc.name}, round {r + 1} of {args.repeat}")
            parts[desc.name].append(run_system(desc, args, repeat=1))
    return {name: combine(p) for name, p in parts.items()}


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--n", type=int, help="jobs per figure (default 2000; --quick 500)")
    p.add_argument("--repeat", type=int, help="repetitions per figure, medians (default 3)")
    p.add_argument("--workers", default="1,2,4", help="worker process counts to drain with")
    p.add_argument("--latency-samples", type=int, help="pushes for the latency (default 100)")
    p.add_argument("--only", help="comma-separated systems: " + ",".join(SYSTEMS))
    p.add_argument(
        "--ref",
        help="also measure laterite at this commit: rows laterite_pg@REV and so on, each"
        " right after its current row, and their ratios (current / REV)",
    )
    p.add_argument("--skip", help="comma-separated systems to leave out")
    p.add_argument(
        "--alternate",
        action="store_true",
        help="measure all the rows in alternating rounds of one repetition each"
        " (a b c, c b a, ...), as --ref does for its pair: for a ratio between peers"
        " on a noisy machine (the default when the table's figures are measured)",
    )
    p.add_argument(
        "--sequential",
        action="store_true",
        help="measure each row's --repeat rounds in one stretch, one row after another",
    )
    p.add_argument(
        "--quick",
        action="store_true",
        help="N=500, 1 repetition, 30 latency samples (unless given)",
    )
    p.add_argument(
        "--merge",
        action="store_true",
        help="keep the other systems' figures from the last bench/results/benchmarks.json",
    )
    p.add_argument(
        "--laterite-args",
        default=os.environ.get("BENCH_LATERITE_ARGS", ""),
        help="extra queue_work arguments for laterite, e.g. '--batch 100'",
    )
    p.add_argument(
        "--system-timeout",
        type=float,
        help="seconds at most for one system (default 900; 7200 with a scale scenario)",
    )
    p.add_argument(
        "--scenarios",
        default="figures",
        help="comma-separated: figures (the table's, the default), churn, backlog, idle,"
        " flow (the unlimited, per-key limited, queue limited and fair drains, in"
        " alternating rounds); scale = churn,backlog,idle; all = every one. Without"
        " --only, the scale scenarios alone run only the rows that take part in them",
    )
    p.add_argument(
        "--churn-b",
        type=int,
        help="churn: jobs pushed in bulk then cleared (default 10^6; --quick 10^5)",
    )
    p.add_argument(
        "--churn-run-b",
        type=int,
        help="churn: jobs run through the workers (default 10^6; --quick 2*10^4)",
    )
    p.add_argument(
        "--backlog-sizes",
        help="backlog: jobs already waiting (default 1e4,1e5,1e6; --quick 1e3,1e4,1e5)",
    )
    p.add_argument(
        "--idle-seconds", type=float, help="idle: seconds measured (default 30; --quick 10)"
    )
    p.add_argument("--flow-processes", type=int, default=2,
                   help="flow: worker processes of each drain (default 2)")
    p.add_argument("--flow-keys", type=int, default=100,
                   help="flow: keys of the per-key limit of 1 (default 100)")
    p.add_argument("--flow-concurrency", type=int, default=10,
                   help="flow: the queue's concurrency limit (default 10)")
    p.add_argument("--no-install", action="store_true", help="use the venvs as they are")
    p.add_argument(
        "--own-postgres",
        action="store_true",
        help="run on a PostgreSQL cluster of the bench's own (initdb, the server's default"
        " settings, autovacuum on), made for the run and removed after",
    )
    p.add_argument(
        "--report-only",
        action="store_true",
        help="redraw the Markdown and chart from bench/results/benchmarks.json",
    )
    p.add_argument("--out", default=str(ROOT / "bench" / "results" / "benchmarks.md"))
    args = p.parse_args(argv)
    defaults = (500, 1, 30) if args.quick else (2000, 3, 100)
    for attr, default in zip(("n", "repeat", "latency_samples"), defaults, strict=True):
        if getattr(args, attr) is None:
            setattr(args, attr, default)
    args.workers = [int(x) for x in args.workers.split(",") if x]
    wanted_scenarios = []
    for x in args.scenarios.split(","):
        x = x.strip()
        expand = {"scale": list(SCALE_SCENARIOS), "all": ["figures", *SCENARIO_ROWS]}
        for y in expand.get(x, [x] if x else []):
            if y != "figures" and y not in SCENARIO_ROWS:
                p.error(f"unknown scenario {y!r}; known: figures, {', '.join(SCENARIO_ROWS)}")
            if y not in wanted_scenarios:
                wanted_scenarios.append(y)
    args.scenarios = wanted_scenarios or ["figures"]
    if args.alternate and args.sequential:
        p.error("--alternate and --sequential exclude each other")
    # Rows minutes apart see different load on a shared machine: the table's ratios
    # between rows hold only when the rows take turns.
    if "figures" in args.scenarios and not args.sequential:
        args.alternate = True
    scale = [x for x in args.scenarios if x != "figures"]
    quick = args.quick
    for attr, full, small in (
        ("churn_b", 1_000_000, 100_000),
        ("churn_run_b", 1_000_000, 20_000),
        ("backlog_sizes", "1e4,1e5,1e6", "1e3,1e4,1e5"),
        ("idle_seconds", 30.0, 10.0),
        ("system_timeout", 7200.0 if set(scale) - {"flow"} else 900.0,
         7200.0 if set(scale) - {"flow"} else 900.0),
    ):
        if getattr(args, attr) is None:
            setattr(args, attr, small if quick else full)
    args.backlog_sizes = [int(float(x)) for x in args.backlog_sizes.split(",") if x]
    names = list(SYSTEMS)
    if "figures" not in args.scenarios and not args.only:
        rows = {r for x in scale for r in SCENARIO_ROWS[x]}
        names = [n for n in names if n.partition("@")[0] in rows]
    if args.ref:
        try:
            args.ref = resolve_ref(args.ref)
        except ValueError as e:
            p.error(str(e))
        names = [x for n in names for x in ([n, f"{n}@{args.ref}"] if n in REF_BASES else [n])]
    if args.only:
        wanted = [x.strip() for x in args.only.split(",") if x.strip()]
        unknown = []
        for x in wanted:
            try:
                system(x)
            except KeyError:
                unknown.append(x)
        if unknown:
            p.error(f"unknown system(s) {unknown}; known: {', '.join(SYSTEMS)}")
        # laterite_pg also brings laterite_pg@REV with --ref.
        keep = set(wanted) | {f"{n}@{args.ref}" for n in wanted if args.ref}
        names = [n for n in names if n in keep] + [n for n in wanted if n not in names]
    if args.skip:
        names = [n for n in names if n not in args.skip.split(",")]
    args.names = names
    args.tree = tree_version()
    return args


def write_outputs(run, md_path):
    md_path = Path(md_path)
    md_path.parent.mkdir(parents=True, exist_ok=True)
    png = md_path.with_suffix(".png")
    run["meta"]["png_name"] = png.name
    md_path.with_suffix(".json").write_text(json.dumps(run, indent=1) + "\n")
    text = report.markdown(run)
    md_path.write_text(text)
    print(text)
    err = ensure_venv("report")
    if err:
        say(f"no chart: {err}")
        return
    proc = subprocess.run(
        [
            str(venv_python("report")),
            "-m",
            "bench.chart",
            str(md_path.with_suffix(".json")),
            str(png),
        ],
        cwd=ROOT,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        capture_output=True,
        text=True,
    )
    if proc.returncode:
        say(f"no chart: {proc.stderr.strip().splitlines()[-1:]}")
    else:
        say(f"wrote {md_path}, {png} and {md_path.with_suffix('.json')}")


def main(argv=None):
    args = parse_args(argv)
    RUN_DIR.mkdir(parents=True, exist_ok=True)
    VENV_DIR.mkdir(parents=True, exist_ok=True)
    json_path = Path(args.out).with_suffix(".json")
    if args.report_only:
        write_outputs(json.loads(json_path.read_text()), args.out)
        return 0
    meta = machine()
    meta.update(
        date=datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        n=args.n,
        repeat=args.repeat,
        latency_samples=args.latency_samples,
        push_seconds=PUSH_SECONDS,
        scenarios=args.scenarios,
        churn_b=args.churn_b,
        churn_run_b=args.churn_run_b,
        backlog_sizes=args.backlog_sizes,
        idle_seconds=args.idle_seconds,
        tree=args.tree,
        alternate=args.alternate,
        command=(
            "python bench/run.py " + shlex.join(argv if argv is not None else sys.argv[1:])
        ).strip(),
        load_start=load(),
    )
    results = {}
    if args.merge and json_path.exists():
        before = json.loads(json_path.read_text())
        results = before.get("results", {})
        # The table stays that earlier run's; these rows are re-measured now.
        meta = dict(before["meta"], merged=before["meta"].get("merged", []))
        meta["merged"].append(
            {
                "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
                "command": "python bench/run.py "
                + shlex.join(sys.argv[1:] if argv is None else argv),
                "systems": args.names,
                "load_start": load(),
                "tree": args.tree,
                "cpu": machine()["cpu"],
                "nproc": os.cpu_count(),
            }
        )
    own_pg = start_own_postgres() if args.own_postgres else None
    if own_pg is not None:
        meta["own_postgres"] = OWN_POSTGRES
    try:
        return _measure(args, argv, meta, results, json_path)
    finally:
        if own_pg is not None:
            own_pg.stop()


OWN_POSTGRES = (
    "a PostgreSQL 15 cluster of the run's own (initdb; the server's defaults, autovacuum "
    "on, but shared_buffers 256MB and max_connections 200)"
)


def start_own_postgres():
    """Start a throwaway PostgreSQL cluster with the server's default settings
    (autovacuum on, as in production) and point every system at it (needs root: the
    cluster runs as the `postgres` user)."""
    try:
        from bench.hosts.procs import free_port
        from bench.hosts.services import OwnPostgres
    except ModuleNotFoundError as e:  # psutil, which the cluster's process watch uses
        raise SystemExit(f"--own-postgres needs {e.name} in this Python: "
                         f"{sys.executable} -m pip install {e.name}") from e

    cluster = OwnPostgres("127.0.0.1", free_port()).start()
    os.environ["BENCH_PG_HOST"], os.environ["BENCH_PG_PORT"] = cluster.host, str(cluster.port)
    say(f"== {OWN_POSTGRES}, on {cluster.host}:{cluster.port}")
    return cluster


def _measure(args, argv, meta, results, json_path):
    load_start = load()
    pg_port = int(os.environ.get("BENCH_PG_PORT", "5432"))
    services = {"PostgreSQL": port_open(pg_port), "Redis": port_open(6379)}
    venv_errors = {}
    t0 = time.monotonic()

    def prepare(desc):
        """Return None, or why `desc` cannot run (a store down, a failed install)."""
        # laterite on Redis keeps its failed list in PostgreSQL here.
        on_redis = desc.kind == "laterite" and desc.store == "Redis"
        needs = {desc.store} | ({"PostgreSQL"} if on_redis else set())
        down = [s for s in needs if s in services and not services[s]]
        if down:
            return f"{down[0]} is not reachable on 127.0.0.1"
        if desc.venv not in venv_errors:
            venv_errors[desc.venv] = None
            if desc.ref:
                try:
                    export_ref(desc.ref)
                except (subprocess.SubprocessError, OSError, RuntimeError) as e:
                    venv_errors[desc.venv] = f"export {desc.ref}: {e}"[:200]
            if not venv_errors[desc.venv] and not args.no_install:
                venv_errors[desc.venv] = ensure_venv(desc.venv)
        return venv_errors[desc.venv]

    done = set()
    for name in args.names:
        if name in done:
            continue
        desc = system(name)
        # A row, its earlier commit's row (--ref) and its variants (VARIANT_ROWS) are
        # measured in alternating rounds; with --alternate, every row is.
        group = [desc]
        if args.alternate:
            group += [system(n) for n in args.names if n != name and n not in done]
        elif args.ref and f"{name}@{args.ref}" in args.names:
            group.append(system(f"{name}@{args.ref}"))
        group += [system(v) for v, (base, _) in VARIANT_ROWS.items()
                  if base == name and v in args.names and v not in done]
        if args.repeat < 2:
            group = [desc]
        ready = []
        for d in group:
            say(f"== {d.name} ({d.label}, {d.store})")
            reason = prepare(d)
            if reason:
                results[d.name] = {"failed": reason, "errors": []}
                say(f"   failed: {reason}")
            else:
                ready.append(d)
        if len(ready) >= 2:
            measured = measure_group(ready, args)
        else:
            measured = {d.name: run_system(d, args) for d in ready}
        for name_, res in measured.items():
            results[name_] = merge_result(results.get(name_), res, args.scenarios)
            if res.get("failed"):
                say(f"   failed: {res['failed']}")
        done.update(d.name for d in group)
    entry = report.ref_history_entry(
        results,
        args.names,
        {
            "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
            "command": "python bench/run.py "
            + shlex.join(sys.argv[1:] if argv is None else argv),
            "load_start": load_start,
            "tree": args.tree,
        },
    )
    if entry:
        meta.setdefault("ref_history", []).append(entry)
    if not meta.get("merged"):
        meta["load_end"] = load()
        meta["seconds"] = round(time.monotonic() - t0)
    for key, store in (("postgresql", "postgresql"), ("redis", "redis-server")):
        for res in results.values():
            if (res.get("versions") or {}).get(store):
                meta[key] = res["versions"][store]
                break
    write_outputs({"meta": meta, "results": results}, args.out)
    say(f"done in {round(time.monotonic() - t0)} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
