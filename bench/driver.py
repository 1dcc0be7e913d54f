"""Measure one system, inside its own virtualenv; write the figures as JSON.

    .venvs/<venv>/bin/python -m bench.driver --system huey --out x.json

Run by bench/run.py; the JSON is rewritten after every figure, so a crash
keeps what was measured before it.
"""

import argparse
import importlib
import itertools
import json
import os
import platform
import random
import statistics
import sys
import time
import traceback
from pathlib import Path

from bench import scenarios
from bench.procs import WorkerGroup
from bench.systems import ROOT, SCENARIO_ROWS, code_root, system

__all__ = ["main"]

# A repetition of push one (and of a loop of single pushes standing in for a bulk
# path) goes on past N until it has pushed for this many seconds: N pushes of a
# fast system take a fifth of a second, short enough for one burst of the
# machine's other work to halve the figure of one repetition (rounds of the same
# code were seen 3x apart), where a second of pushing averages such bursts out.
PUSH_SECONDS = 1.0


class Records:
    """Read the lines that jobs append to the record file, from a mark on."""

    def __init__(self, path):
        self.path = Path(path)
        self.path.touch()
        self.mark()

    def mark(self):
        self.offset = self.path.stat().st_size
        self.rest = b""

    def new(self):
        """Return [(id, pid, t)] appended since the last call."""
        with open(self.path, "rb") as f:
            f.seek(self.offset)
            data = f.read()
        self.offset += len(data)
        data = self.rest + data
        lines = data.split(b"\n")
        self.rest = lines.pop()
        out = []
        for line in lines:
            i, pid, t = line.split()
            out.append((int(i), int(pid), float(t)))
        return out


class Stalled(Exception):
    pass


def wait_for(records, ids, workers, timeout, stall=30.0, partial=False):
    """Wait until every id in `ids` is recorded; return {id: (pid, t)}.

    Past `timeout`, return what ran if `partial`, else raise Stalled.
    """
    want = set(ids)
    seen = {}
    start = last_progress = time.monotonic()
    while want:
        got = records.new()
        for i, pid, t in got:
            if i in want:
                want.discard(i)
                seen[i] = (pid, t)
        now = time.monotonic()
        if got:
            last_progress = now
        if not want:
            break
        if workers is not None and workers.dead():
            raise Stalled(f"worker exited ({workers.dead()}) with {len(want)} jobs left")
        if partial and now - start > timeout and len(seen) > 1:
            return seen
        if now - start > timeout or now - last_progress > stall:
            raise Stalled(f"{len(seen)}/{len(ids)} jobs ran within {now - start:.0f} s")
        time.sleep(0.005)
    return seen


class Run:
    def __init__(self, args):
        self.args = args
        self.desc = system(args.system)
        self.run_dir = Path(args.run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.record_path = self.run_dir / f"{self.desc.name}.rec"
        self.record_path.unlink(missing_ok=True)
        self.log_path = self.run_dir / f"{self.desc.name}.workers.log"
        self.log_path.unlink(missing_ok=True)
        self.records = Records(self.record_path)
        self.out = Path(args.out)
        self.result = {"system": self.desc.name, "errors": [], "notes": []}
        self.phase = 0
        self.workers = None
        self.bulk_rate = None

    def save(self):
        tmp = self.out.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.result, indent=1))
        tmp.replace(self.out)

    def log(self, msg):
        print(f"[{self.desc.name}] {msg}", file=sys.stderr, flush=True)

    def ids(self, n):
        self.phase += 1
        base = self.phase * 10_000_000
        return list(range(base, base + n))

    def figure(self, key, values, unit):
        values = [v for v in values if v is not None]
        if values:
            self.result[key] = {"median": statistics.median(values), "values": values, "unit": unit}
        self.save()

    # -- phases -----------------------------------------------------------------
    def measure_push(self, sys_):
        n, reps = self.args.n, self.args.repeat
        for key, bulk in (("push_one", False), ("push_bulk", True)):
            values = []
            for _ in range(reps):
                sys_.reset()
                warm = self.ids(20)
                (sys_.push_bulk if bulk else _loop(sys_.push_one))(warm)
                sys_.reset()
                ids = self.ids(n)
                t0 = time.perf_counter()
                if bulk and sys_.has_bulk:
                    sys_.push_bulk(ids)
                    done = n
                else:
                    # A slow system pushes for the budget's time, not for minutes; a
                    # fast one goes on past N for PUSH_SECONDS (see its comment).
                    stop = t0 + self.args.push_budget
                    enough = t0 + PUSH_SECONDS
                    push = sys_.push_bulk if bulk else sys_.push_one
                    for done, i in enumerate(itertools.count(ids[0]), 1):
                        push([i] if bulk else i)
                        if not done % 10:
                            now = time.perf_counter()
                            if now > stop or (done >= n and now >= enough):
                                break
                values.append(done / (time.perf_counter() - t0))
            self.figure(key, values, "jobs/s")
            self.log(f"{key}: {statistics.median(values):,.0f} jobs/s")
            if bulk:
                self.bulk_rate = statistics.median(values)
        self.result["has_bulk"] = sys_.has_bulk
        sys_.reset()

    def start_workers(self, sys_, n):
        self.records.mark()
        self.workers = WorkerGroup(
            sys_.worker_commands(n), sys_.worker_env(), str(code_root(self.desc)), self.log_path
        )
        waited = self.workers.wait_idle()
        # Warm every connection path, then let the workers settle again.
        warm = self.ids(2 * n)
        sys_.push_bulk(warm)
        wait_for(self.records, warm, self.workers, timeout=90)
        self.workers.wait_idle(min_age=0, timeout=20)
        self.log(f"{n} worker process(es) ready after {waited:.1f} s")

    def stop_workers(self):
        if self.workers is not None:
            self.workers.stop()
            self.workers = None

    def drain_n(self, sys_):
        """N for a drain figure: args.n, less for a system too slow to fill or drain it."""
        n = self.args.n
        if sys_.max_drain_jobs:
            n = min(n, sys_.max_drain_jobs)
        if self.bulk_rate:
            # Filling the queue of a slow pusher takes at most ~10 s.
            n = min(n, max(100, int(self.bulk_rate * 10)))
        return n

    def drain_values(self, sys_, n_workers, vacuum=True, repeat=None):
        """Drain N jobs `repeat` times with the running workers; return ([jobs/s], N).

        `vacuum`: bring the store to the same state first (VACUUM on PostgreSQL);
        the dead-tuple scenarios leave it as the churn left it.
        """
        n = self.drain_n(sys_)
        values = []
        budget = time.monotonic() + self.args.drain_budget
        for _ in range(repeat or self.args.repeat):
            ids = self.ids(n)
            if vacuum:
                sys_.settle_store()
            self.workers.pause()
            self.records.mark()
            try:
                sys_.push_bulk(ids)
            finally:
                self.workers.resume()
            left = max(budget - time.monotonic(), 5.0)
            seen = wait_for(self.records, ids, self.workers, timeout=left, partial=True)
            times = sorted(t for _, t in seen.values())
            values.append((len(times) - 1) / max(times[-1] - times[0], 1e-6))
            if len(seen) < n:
                # Too slow for the budget: the rate of what ran stands; clear the rest.
                self.result["notes"].append(
                    f"drain with {n_workers}: {len(seen)} of {n} jobs ran within the"
                    f" {self.args.drain_budget:.0f} s budget; the rate is theirs"
                )
                # Clear the rest with the workers stopped: emptying the store
                # under a running job can kill a peer's worker.
                self.stop_workers()
                sys_.reset()
                self.start_workers(sys_, n_workers)
                break
            self.workers.wait_idle(min_age=0, timeout=20)
            if time.monotonic() > budget:
                break
        return values, n

    def measure_drain(self, sys_, n_workers):
        values, n = self.drain_values(sys_, n_workers)
        self.figure(f"drain_{n_workers}", values, "jobs/s")
        self.result.setdefault("drain_n", {})[str(n_workers)] = n
        self.log(f"drain with {n_workers}: {statistics.median(values):,.0f} jobs/s (N={n})")

    def latency_samples(self, sys_):
        """Push-to-start on the running idle worker: return ([ms], missed)."""
        samples = []
        missed = 0
        budget = time.monotonic() + self.args.latency_budget
        ids = self.ids(self.args.latency_samples)
        for i in ids:
            if time.monotonic() > budget:
                break
            self.records.mark()
            t0 = time.time()
            sys_.push_wake(i)
            try:
                seen = wait_for(self.records, [i], self.workers, timeout=5, stall=5)
                samples.append((seen[i][1] - t0) * 1000)
            except Stalled:
                missed += 1
                if missed >= 3:
                    break
            # A random phase against a polling worker's sleep: a fixed gap after
            # the last job would always land at the start of its sleep.
            time.sleep(random.uniform(0.02, 0.04) + random.uniform(0, sys_.poll_interval))
        return samples, missed

    def measure_latency(self, sys_):
        samples, missed = self.latency_samples(sys_)
        if samples:
            self.result["latency"] = latency_summary(samples, missed)
            self.log(
                f"latency p50 {self.result['latency']['p50']:.2f} ms,"
                f" p95 {self.result['latency']['p95']:.2f} ms ({len(samples)} samples)"
            )
        if missed:
            self.result["notes"].append(f"latency: {missed} pushed job(s) did not start within 5 s")
        self.save()

    def run(self):
        module = importlib.import_module(f"bench.systems.{self.desc.module}")
        sys_ = module.System(self.desc, self.run_dir, self.record_path)
        self.result["python"] = platform.python_version()
        self.result["versions"] = sys_.versions()
        self.result["notes"] += [sys_.notes] if sys_.notes else []
        self.save()
        self.log("setup")
        sys_.setup()
        try:
            if "figures" in self.args.scenarios:
                self.measure_figures(sys_)
            for name in self.args.scenarios:
                if self.desc.base in SCENARIO_ROWS.get(name, ()):
                    self.guard(name, getattr(scenarios, name), self, sys_)
        finally:
            self.stop_workers()
            try:
                sys_.reset()
                sys_.teardown()
            except Exception as e:
                self.error("teardown", e)
            self.save()

    def measure_figures(self, sys_):
        """The table's figures: push one, push bulk, drain with 1, 2, 4 processes, latency."""
        try:
            if sys_.measure_push:
                self.guard("push", self.measure_push, sys_)
            for n in self.args.workers:
                sys_.reset()
                try:
                    self.start_workers(sys_, n)
                    self.guard(f"drain_{n}", self.measure_drain, sys_, n)
                    if n == 1 and sys_.measure_latency and self.args.latency_samples:
                        self.guard("latency", self.measure_latency, sys_)
                except Exception as e:
                    self.error(f"workers({n})", e)
                finally:
                    self.stop_workers()
        finally:
            self.stop_workers()

    def guard(self, what, fn, *args):
        try:
            fn(*args)
        except Exception as e:
            self.error(what, e)

    def error(self, what, e):
        traceback.print_exc()
        first = str(e).strip().splitlines()[0] if str(e).strip() else ""
        msg = f"{what}: {type(e).__name__}: {first}"
        self.result["errors"].append(msg[:300])
        self.log("ERROR " + msg)
        self.save()


def latency_summary(samples, missed=0):
    q = (
        statistics.quantiles(samples, n=20, method="inclusive")
        if len(samples) > 1
        else [samples[0]] * 19
    )
    return {
        "p50": statistics.median(samples),
        "p95": q[18],
        "samples": len(samples),
        "missed": missed,
        "unit": "ms",
        "values": [round(x, 3) for x in samples],
    }


def _loop(push_one):
    def push(ids):
        for i in ids:
            push_one(i)

    return push


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--system", required=True, help="a row's name (bench.systems.system)")
    p.add_argument("--n", type=int, default=2000)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--workers", type=lambda s: [int(x) for x in s.split(",")], default=[1, 2, 4])
    p.add_argument("--latency-samples", type=int, default=100)
    p.add_argument(
        "--latency-budget", type=float, default=30.0, help="seconds at most for the latency figure"
    )
    p.add_argument(
        "--push-budget",
        type=float,
        default=10.0,
        help="seconds at most for one push-one repetition",
    )
    p.add_argument(
        "--drain-budget",
        type=float,
        default=30.0,
        help="seconds at most for one drain figure (all its repetitions)",
    )
    p.add_argument(
        "--scenarios",
        type=lambda s: [x for x in s.split(",") if x],
        default=["figures"],
        help="figures (the table's), churn, backlog, idle: see bench/scenarios.py",
    )
    scenarios.add_arguments(p)
    p.add_argument("--run-dir", default=str(ROOT / "bench" / ".runs"))
    p.add_argument("--out", required=True)
    args = p.parse_args(argv)
    try:
        system(args.system)
    except KeyError as e:
        p.error(e.args[0])
    os.environ.setdefault("PYTHONPATH", str(ROOT))
    Run(args).run()


if __name__ == "__main__":
    main()
