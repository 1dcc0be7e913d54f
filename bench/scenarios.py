"""The scale scenarios, run by bench.driver after (or instead of) the table's figures.

    churn    PostgreSQL after churn, no VACUUM in between: the drain (1 process) of
             N fresh jobs (a) after B jobs were pushed in bulk and cleared, (b) after
             B jobs ran through the workers; each against the same row's drain on
             fresh, vacuumed tables in the same run.
    backlog  push one, drain (1 process) and push-to-start with B jobs already
             waiting, for each B of --backlog-sizes; for laterite also with B
             delayed jobs and B failed rows (the largest B).
    idle     --idle-processes idle worker processes: the CPU of their process
             tree and the queries or commands they send, over --idle-seconds.
    flow     laterite's drain (--flow-processes processes) with no limit, with a
             per-key limit of 1 over --flow-keys keys, with a queue
             concurrency limit of --flow-concurrency, and fair (its jobs' fair
             keys over --flow-keys keys, served in turn), in alternating rounds;
             each against the unlimited drain of the same run.

What "already waiting" means for each figure (see bench/README.md):
- push one: N single pushes into the queue the workers serve, behind the
  backlog (the workers paused);
- drain: the backlog's own head: the workers resume in front of B waiting
  jobs; the figure is the rate of the first N to start;
- push-to-start: the backlog waits where the idle worker does not look (a
  queue it does not serve), so the pushed job is the one it takes next.
The delayed and failed backlogs never stand in front of a job: all three
figures are then measured as in the table, with those rows in the store.

Each system says which scenarios it takes part in (`scenarios`) and how it
makes a backlog (`fill`) or clears its queue (`clear`): bench/systems/.
"""

import contextlib
import math
import re
import socket
import statistics
import threading
import time

from bench.procs import _TICK

__all__ = ["add_arguments", "backlog", "churn", "flow", "idle"]


def add_arguments(p):
    p.add_argument("--churn-b", type=int, default=1_000_000, help="churn (a): jobs pushed, cleared")
    p.add_argument(
        "--churn-run-b", type=int, default=1_000_000, help="churn (b): jobs run through workers"
    )
    p.add_argument("--churn-procs", type=int, default=2, help="churn (b): processes running them")
    p.add_argument(
        "--backlog-sizes",
        type=lambda s: [int(float(x)) for x in s.split(",") if x],
        default=[10_000, 100_000, 1_000_000],
        help="backlog sizes, comma-separated; the largest also for laterite's delayed/failed",
    )
    p.add_argument("--idle-processes", type=int, default=8)
    p.add_argument("--idle-seconds", type=float, default=30.0)
    p.add_argument("--flow-processes", type=int, default=2)
    p.add_argument("--flow-keys", type=int, default=100)
    p.add_argument("--flow-concurrency", type=int, default=10)


def _fig(values, **extra):
    values = [v for v in values if v is not None]
    if not values:
        return None
    return {"median": statistics.median(values), "values": values, "unit": "jobs/s", **extra}


def _wait_count(run, ids, count, timeout, stall=60.0, partial=False):
    """Wait until `count` of `ids` have started; return their start times, sorted.

    Past `timeout`, return those that started if `partial` (and more than one
    did), else raise.
    """
    want = set(ids)
    times = []
    start = last = time.monotonic()
    while len(times) < count:
        got = run.records.new()
        times += [t for i, _, t in got if i in want]
        now = time.monotonic()
        if got:
            last = now
        if run.workers is not None and run.workers.dead():
            raise RuntimeError(f"worker exited ({run.workers.dead()})")
        if partial and now - start > timeout and len(times) > 1:
            break
        if now - start > timeout or now - last > stall:
            raise RuntimeError(f"{len(times)}/{count} jobs ran within {now - start:.0f} s")
        time.sleep(0.01)
    return sorted(times)[:count]


def _push_one_rate(run, sys_, n):
    """N single pushes (cut to the push budget); return jobs/s."""
    ids = run.ids(n)
    t0 = time.perf_counter()
    stop = t0 + run.args.push_budget
    done = 0
    for done, i in enumerate(ids, 1):
        sys_.push_one(i)
        if not done % 10 and time.perf_counter() > stop:
            break
    return done / (time.perf_counter() - t0)


def _timed(fn, *args):
    t0 = time.monotonic()
    fn(*args)
    return round(time.monotonic() - t0, 1)


# -- churn ---------------------------------------------------------------------
def churn(run, sys_):
    """Dead tuples: the drain of N after B pushed and cleared / B run, no VACUUM."""
    a = run.args
    res = run.result["churn"] = {
        "b_cleared": a.churn_b,
        "b_ran": a.churn_run_b,
        "procs": a.churn_procs,
    }

    def drain(label, vacuum):
        run.start_workers(sys_, 1)
        try:
            dead, live = sys_.pg_dead_tuples()
            values, n = run.drain_values(sys_, 1, vacuum=vacuum)
        finally:
            run.stop_workers()
        fig = _fig(values, n=n, dead_tuples=dead, live_tuples=live)
        run.log(
            f"churn {label}: drain {fig['median']:,.0f} jobs/s (N={n}; {dead:,} dead tuples"
            " before it)"
        )
        return fig

    # Fresh drains before, between and after the two churned ones: each churned
    # drain is divided by the fresh ones on either side of it (geometric mean),
    # so load from other work that changes within minutes falls on both.
    fresh = []

    def fresh_drain():
        sys_.reset()
        fresh.append(drain(f"fresh ({len(fresh) + 1} of 3)", vacuum=True))
        values = [v for f in fresh for v in f["values"]]
        res["fresh"] = _fig(values, n=fresh[0]["n"], dead_tuples=fresh[0]["dead_tuples"])
        res["fresh_runs"] = [f["median"] for f in fresh]
        run.save()

    def against(key, before, after):
        res[key]["vs_fresh"] = res[key]["median"] / math.sqrt(before["median"] * after["median"])

    fresh_drain()

    # (a) B pushed in bulk and cleared, no VACUUM since.
    sys_.reset()
    sys_.settle_store()
    res["fill_s"] = _timed(sys_.fill, run.ids(a.churn_b))
    res["clear_s"] = _timed(sys_.clear)
    res["cleared"] = drain(f"after {a.churn_b:,} cleared", vacuum=False)
    fresh_drain()
    against("cleared", fresh[0], fresh[1])

    # (b) B run through the workers, no VACUUM since.
    sys_.reset()
    sys_.settle_store()
    run.start_workers(sys_, a.churn_procs)
    try:
        ids = run.ids(a.churn_run_b)
        run.records.mark()
        t0 = time.monotonic()
        sys_.fill(ids)
        _wait_count(run, ids, len(ids), timeout=120 + len(ids) / 200)
        res["ran_s"] = round(time.monotonic() - t0, 1)
        run.workers.wait_idle(min_age=0, timeout=20)
    finally:
        run.stop_workers()
    res["ran"] = drain(f"after {a.churn_run_b:,} ran", vacuum=False)
    fresh_drain()
    against("ran", fresh[1], fresh[2])
    run.save()
    run.log(
        f"churn: cleared / fresh {res['cleared']['vs_fresh']:.2f},"
        f" ran / fresh {res['ran']['vs_fresh']:.2f}"
    )


# -- backlog -------------------------------------------------------------------
def _head(run, sys_, size, n):
    """push one behind `size` waiting jobs, then the drain of the backlog's first N."""
    sys_.reset()
    run.start_workers(sys_, 1)
    try:
        run.workers.pause()
        try:
            backlog = run.ids(size)
            fill_s = _timed(sys_.fill, backlog)
            push_one = _push_one_rate(run, sys_, n)
            sys_.settle_store()  # as before every drain of the table
            run.records.mark()
        finally:
            run.workers.resume()
        # A slow drain is cut to a budget, as the table's drains are.
        budget = max(60.0, run.args.drain_budget)
        times = _wait_count(run, backlog, min(n, size), timeout=budget, partial=True)
        drain = (len(times) - 1) / max(times[-1] - times[0], 1e-6)
        if len(times) < min(n, size):
            run.result["notes"].append(
                f"backlog {size:,}: {len(times)} of the first {n} jobs ran within the"
                f" {budget:.0f} s budget; the drain rate is theirs"
            )
    finally:
        run.stop_workers()
    return {"push_one": push_one, "drain": drain, "drain_n": len(times), "fill_s": fill_s}


def _beside(run, sys_, size, how, figures=("push_one", "drain", "latency")):
    """The table's figures, with `size` jobs waiting where the worker does not look."""
    sys_.reset()
    out = {"fill_s": _timed(sys_.fill, run.ids(size), how)}
    if "push_one" in figures:
        out["push_one"] = _push_one_rate(run, sys_, run.args.n)
    run.start_workers(sys_, 1)  # its warm-up also runs the N just pushed
    try:
        run.workers.wait_idle(min_age=0, timeout=30)
        if "drain" in figures:
            values, n = run.drain_values(sys_, 1)
            out["drain"], out["drain_n"] = statistics.median(values), n
        if "latency" in figures and sys_.measure_latency and run.args.latency_samples:
            from bench.driver import latency_summary

            samples, missed = run.latency_samples(sys_)
            if samples:
                lat = latency_summary(samples, missed)
                out["p50"], out["p95"], out["samples"] = lat["p50"], lat["p95"], len(samples)
    finally:
        run.stop_workers()
    return out


def backlog(run, sys_):
    a = run.args
    n = run.drain_n(sys_)
    rows = run.result.setdefault("backlog", {"n": n, "rows": []})["rows"]
    for size in a.backlog_sizes:
        row = {"kind": "waiting", "size": size}
        row.update(_head(run, sys_, size, n))
        run.save()
        beside = _beside(run, sys_, size, "beside", figures=("latency",))
        row.update({k: v for k, v in beside.items() if k in ("p50", "p95", "samples")})
        row["beside_fill_s"] = beside["fill_s"]
        rows.append(row)
        run.save()
        run.log(
            f"backlog {size:,} waiting: push one {row['push_one']:,.0f}/s, drain"
            f" {row['drain']:,.0f}/s, p50 {row.get('p50', float('nan')):.2f} ms"
        )
    if sys_.desc.kind != "laterite":
        return
    size = max(a.backlog_sizes)
    for how in ("delayed", "failed"):
        row = {"kind": how, "size": size}
        row.update(_beside(run, sys_, size, how))
        rows.append(row)
        run.save()
        run.log(
            f"backlog {size:,} {how}: push one {row['push_one']:,.0f}/s, drain"
            f" {row['drain']:,.0f}/s, p50 {row.get('p50', float('nan')):.2f} ms"
        )


# -- idle ----------------------------------------------------------------------
class _PgProbe:
    """Transactions and table scans of one database, from its statistics."""

    def __init__(self, dbname):
        import psycopg

        from bench.systems.base import pg_dsn

        self.dbname = dbname
        self.admin = psycopg.connect(pg_dsn("postgres"), autocommit=True)
        self.own = psycopg.connect(pg_dsn(dbname), autocommit=True)

    def snapshot(self):
        # Our own read of pg_stat_user_tables is one transaction in the
        # database: between two snapshots it counts once (subtracted in delta()).
        scans, tup = self.own.execute(
            "SELECT coalesce(sum(seq_scan + coalesce(idx_scan, 0)), 0),"
            " coalesce(sum(n_tup_ins + n_tup_upd + n_tup_del), 0) FROM pg_stat_user_tables"
        ).fetchone()
        xacts, returned = self.admin.execute(
            "SELECT xact_commit + xact_rollback, tup_returned + tup_fetched"
            " FROM pg_stat_database WHERE datname = %s",
            (self.dbname,),
        ).fetchone()
        return {"xacts": xacts, "table_scans": scans, "rows_written": tup, "rows_read": returned}

    def delta(self, before, after):
        out = {k: int(after[k] - before[k]) for k in before}
        out["xacts"] -= 1
        return out

    def sessions(self):
        """When each other session of the database last started a query: live, unlike
        the statistics above, which a backend reports up to 10 s late."""
        return dict(self.admin.execute(
            "SELECT pid, query_start FROM pg_stat_activity WHERE datname = %s AND pid <> %s",
            (self.dbname, self.own.info.backend_pid),
        ).fetchall())

    def close(self):
        self.admin.close()
        self.own.close()


class _RedisMonitor:
    """Every command sent to one Redis db while it runs (MONITOR, filtered by db).

    INFO commandstats counts the whole server, which other work shares here;
    MONITOR names the db of each command.
    """

    LINE = re.compile(rb'^\+\d+\.\d+ \[(\d+) [^\]]*\] "([^"]+)"')

    def __init__(self, host, port, db):
        self.db = str(db).encode()
        self.counts = {}
        self.sock = socket.create_connection((host, port), timeout=1)
        self.sock.sendall(b"MONITOR\r\n")
        self.stopping = False
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self):
        buf = b""
        while not self.stopping:
            try:
                data = self.sock.recv(65536)
            except TimeoutError:
                continue
            except OSError:
                return
            if not data:
                return
            buf += data
            *lines, buf = buf.split(b"\r\n")
            for line in lines:
                m = self.LINE.match(line)
                if m and m.group(1) == self.db:
                    cmd = m.group(2).decode().lower()
                    self.counts[cmd] = self.counts.get(cmd, 0) + 1

    def stop(self):
        self.stopping = True
        self.thread.join(timeout=3)
        with contextlib.suppress(OSError):
            self.sock.close()
        return dict(self.counts)


# Seconds after which an idle PostgreSQL backend has reported its statistics.
PG_STATS_FLUSH = 11.0
# Seconds from the warm-up to the window: past the first wake-up (30 s) of a worker
# that looked as it went idle and found a warm-up job still claimed by another, so
# looks again then (laterite's idle workers; any system's settle as well).
IDLE_SETTLE = 35.0


def idle(run, sys_):
    """CPU and queries of idle worker processes over --idle-seconds."""
    from bench.systems.base import REDIS_HOST, REDIS_PORT

    a = run.args
    sys_.reset()
    run.start_workers(sys_, a.idle_processes)
    pg = monitor = None
    try:
        run.workers.wait_idle(min_age=0, timeout=30)
        # Settled, and past the warm-up's last statistics flush: a backend gone idle
        # reports its counts up to PGSTAT_IDLE_INTERVAL (10 s) after its last
        # transaction.
        time.sleep(max(IDLE_SETTLE, PG_STATS_FLUSH))
        pids = run.workers.pids()
        if sys_.desc.store != "SQLite":  # laterite on Redis keeps its tables in PostgreSQL
            pg = _PgProbe(sys_.db_name)
            pg_before = pg.snapshot()
            sessions_before = pg.sessions()
            pg_t0 = time.monotonic()
        if sys_.desc.store == "Redis":
            monitor = _RedisMonitor(REDIS_HOST, REDIS_PORT, sys_.redis_db)
        t0 = time.monotonic()
        ticks0 = run.workers.cpu_ticks()
        time.sleep(a.idle_seconds)
        ticks1 = run.workers.cpu_ticks()
        seconds = time.monotonic() - t0
        res = {
            "processes": a.idle_processes,
            "tree_processes": len(pids),
            "seconds": round(seconds, 1),
            "cpu_pct": 100.0 * (ticks1 - ticks0) / _TICK / seconds,
        }
        if monitor is not None:
            res["redis_commands"] = monitor.stop()
            monitor = None
        if pg is not None:
            sessions_after = pg.sessions()
            # The worker sessions that sent any query in the window (or connected).
            querying = sum(1 for pid, started in sessions_after.items()
                           if sessions_before.get(pid) != started)
            time.sleep(PG_STATS_FLUSH)  # the window's own counts, reported as above
            res["pg"] = pg.delta(pg_before, pg.snapshot())
            res["pg"]["seconds"] = round(time.monotonic() - pg_t0, 1)
            res["pg"]["querying_sessions"] = querying
            res["pg"]["sessions"] = len(sessions_after)
    finally:
        if monitor is not None:
            monitor.stop()
        if pg is not None:
            pg.close()
        run.stop_workers()
    run.result["idle"] = res
    run.save()
    cmds = sum((res.get("redis_commands") or {}).values())
    run.log(
        f"idle, {a.idle_processes} processes ({len(pids)} in the tree): CPU"
        f" {res['cpu_pct']:.2f}% of a core, PostgreSQL {(res.get('pg') or {}).get('xacts', '-')}"
        f" transactions ({(res.get('pg') or {}).get('querying_sessions', '-')} of its"
        f" {(res.get('pg') or {}).get('sessions', '-')} sessions sent a query),"
        f" Redis {cmds} commands in {seconds:.0f} s"
    )


def flow(run, sys_):
    """Limited drains beside the unlimited one: modes set by $BENCH_FLOW (see
    bench/laterite_app and bench/djproject/settings.py), alternating per round."""
    import os

    a = run.args
    modes = ["unlimited", "keyed", "queue", "fair"]
    values = {mode: [] for mode in modes}
    os.environ["BENCH_FLOW_KEYS"] = str(a.flow_keys)
    os.environ["BENCH_FLOW_CONCURRENCY"] = str(a.flow_concurrency)
    n = run.drain_n(sys_)
    try:
        for round_ in range(a.repeat):
            order = modes if round_ % 2 == 0 else modes[::-1]
            for mode in order:
                os.environ["BENCH_FLOW"] = mode  # the workers' environment, and the pushes
                sys_.flow = mode
                sys_.reset()
                run.start_workers(sys_, a.flow_processes)
                try:
                    got, n = run.drain_values(sys_, a.flow_processes, repeat=1)
                finally:
                    run.stop_workers()
                values[mode] += got
                run.log(f"flow {mode}: drain {got[0]:,.0f} jobs/s (N={n})")
    finally:
        os.environ.pop("BENCH_FLOW", None)
        sys_.flow = "unlimited"
    res = {mode: _fig(vals) for mode, vals in values.items() if vals}
    extra = getattr(sys_, "extra", [])
    batch = extra[extra.index("--batch") + 1] if "--batch" in extra[:-1] else "20 (default)"
    res.update(processes=a.flow_processes, keys=a.flow_keys, concurrency=a.flow_concurrency,
               batch=batch, n=n)
    run.result["flow"] = res
    run.save()
    base = res["unlimited"]["median"]
    run.log("flow: " + ", ".join(f"{m} {res[m]['median']:,.0f}/s ({res[m]['median'] / base:.2f}x)"
                                 for m in modes if m in res))
