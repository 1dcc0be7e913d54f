"""Workers killed at random, and a database restarted under them: no job is lost.

Both tests run real supervisors and worker processes for a while; they are
marked slow and run in CI all the same.
"""

from __future__ import annotations

import contextlib
import glob
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from django.db import connection

from laterite_django.management.commands.queue_work import DEFAULT_BATCH
from laterite_django.models import FailedJob
from laterite_django.worker.loop import SETTLE_EVERY
from tests.conftest import ROOT, Stderr, short_or_full, wait_for
from tests.testapp import jobs
from tests.testapp.models import Record
from tests.worker.test_processes import kill_tree, waiting, worker_pids

__all__: list[str] = []

pytestmark = pytest.mark.slow


def start(workers, *args: str, env: dict[str, str]) -> tuple[subprocess.Popen, Stderr]:
    proc = workers.start(*args, env=env)
    return proc, Stderr(proc)


def drained(store, proc: subprocess.Popen, stderr: Stderr, patience: float = 60) -> None:
    """Wait until no job waits; fail, saying where things stand, if progress stops."""
    last, since = None, time.monotonic()
    while True:
        left = waiting(store)
        if left == 0:
            return
        if left != last:
            last, since = left, time.monotonic()
        elif time.monotonic() - since > patience:
            counts = store.counts()
            pytest.fail(f"{left} jobs stuck for {patience:g} s: {counts}; workers "
                        f"{sorted(worker_pids(proc))}\n{''.join(stderr.lines[-40:])}")
        time.sleep(0.5)


def test_random_kills_lose_no_job(store, workers):
    if connection.vendor != "postgresql":
        # It guards the PostgreSQL and Redis claims; the Redis store runs it
        # in the PostgreSQL leg. SQLite's claims are covered by the worker-rule suite.
        pytest.skip("the chaos test runs in the PostgreSQL leg (database and Redis stores)")
    total = 2000
    jobs.chaos.push_many([(i,) for i in range(total)])  # tries=25, backoff 0
    env = {"LATERITE_TEST_RETRY_AFTER": "3", "LATERITE_TEST_LOG_LEVEL": "WARNING"}
    args = ("--processes", "4")
    proc, stderr = start(workers, *args, env=env)
    kills = 0
    rng = random.Random(5)
    try:
        # Kill a random worker every 0.15 s, 30 in all; at the 15th, kill the whole
        # supervisor with its workers (their claims expire after retry_after).
        deadline = time.monotonic() + 60
        tree_killed = False
        tree_kills = 0
        while kills < 30 and time.monotonic() < deadline and waiting(store):
            time.sleep(0.15)
            pids = sorted(worker_pids(proc))
            if not pids:
                continue
            if kills >= 15 and not tree_killed:
                tree_killed = True
                tree_kills = len(pids)
                kills += len(pids)
                kill_tree(proc)
                proc, stderr = start(workers, *args, env=env)
                continue
            try:
                psutil.Process(rng.choice(pids)).kill()
                kills += 1
            except psutil.NoSuchProcess:
                pass
        # Now the rest drains, claims of the dead returned after retry_after.
        drained(store, proc, stderr)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
    finally:
        kill_tree(proc)
    values = list(Record.objects.filter(kind="chaos").values_list("value", flat=True))
    ran = {int(v) for v in values}
    duplicates = len(values) - len(ran)
    print(f"\n{total} jobs, {kills} workers killed, {duplicates} ran twice or more")
    assert ran == set(range(total))
    assert not FailedJob.objects.exists(), FailedJob.objects.first().error
    # A worker killed alone reruns at most its running job: its supervisor deletes
    # the jobs it had finished. Killed with its supervisor, it reruns also the jobs
    # it finished but had not deleted yet (at most SETTLE_EVERY).
    assert duplicates <= (kills - tree_kills) + tree_kills * min(DEFAULT_BATCH, SETTLE_EVERY)
    assert "was killed by SIGKILL; starting another" in stderr.text()


def test_whole_group_kills_with_one_process_and_batches(store, workers, tmp_path):
    """`queue_work --processes 1 --batch 20` SIGKILLed whole, again and again.

    No supervisor settles anything: what holds is the store's sweep and the
    worker's hand. A job that finished more than a moment before a kill never
    runs again (finished jobs are deleted with the next claim, or by the
    heartbeat once a job runs longer than 50 ms); a job that never started
    never loses an attempt (tries=1 here, so one lost attempt would fail it).
    """
    total = 600
    rng = random.Random(7)
    # Mostly quick jobs, so batches grow; now and then a slow one behind them.
    jobs.chaos_once.push_many(
        [(i, 0.3 if i % 40 == 39 else 0.002) for i in range(total)])
    started_file = tmp_path / "starts"
    env = {"LATERITE_TEST_RETRY_AFTER": "1", "LATERITE_TEST_LOG_LEVEL": "WARNING",
           "LATERITE_TEST_STARTS": str(started_file)}
    args = ("--processes", "1", "--batch", "20")
    kills: list[float] = []
    for _ in range(int(short_or_full(6, 12))):
        if not waiting(store):
            break
        proc, _ = start(workers, *args, env=env)
        time.sleep(rng.uniform(0.4, 1.2))
        kill_tree(proc)
        kills.append(time.time())
    time.sleep(1.5)  # the last claims expire (retry_after 1 s)
    proc, stderr = start(workers, "--stop-when-empty", *args, env=env)
    assert proc.wait(120) == 0, stderr.text()

    def runs(kind: str) -> dict[int, list]:
        found: dict[int, list] = {}
        for value, at in Record.objects.filter(kind=kind).values_list("value", "at"):
            found.setdefault(int(value), []).append(at.timestamp())
        return found

    starts, ends = runs("once-start"), runs("once-end")
    failed = {int(json.loads(row.payload)["args"][0]): row.error
              for row in FailedJob.objects.all()}
    # Every job ran to its end, or failed after it had started (killed mid-run at
    # the head of its batch: that attempt counted, and tries=1).
    assert set(ends) | set(failed) == set(range(total))
    # Started: its start record, or (killed while that record waited for the
    # database's lock) the line the job wrote first.
    began = {int(line) for line in started_file.read_text().split()} if (
        started_file.exists()) else set()
    never_started = set(failed) - set(starts) - began
    # The head of a batch counts as started from its claim (so a job that kills its
    # worker is charged): a kill between that claim and the job's first line charges
    # one that never ran. That window is a few calls wide; on a loaded machine one of
    # twelve kills may land in it, never more than that.
    assert len(never_started) <= 1, {i: failed[i] for i in sorted(never_started)[:5]}
    # A finished job ran again only if a kill came within a moment of its end.
    again = []
    for i, times in ends.items():
        later = [s for s in starts[i] if s > times[0]]
        if later and not any(times[0] < k < times[0] + 0.25 for k in kills):
            again.append(i)
    duplicates = sum(len(v) - 1 for v in starts.values())
    print(f"\n{total} jobs, {len(kills)} whole-group kills, {duplicates} ran twice or more, "
          f"{len(failed)} failed after starting")
    assert not again, f"jobs run again long after they finished: {again[:10]}"


# -- PostgreSQL restarted under the workers ---------------------------------------------


def _server_bin() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"))
    return Path(found[-1]).parent if found else None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Cluster:
    """A throwaway PostgreSQL server in a temporary folder, on its own port and socket."""

    def __init__(self, bindir: Path) -> None:
        self.bindir = bindir
        self.dir = Path(tempfile.mkdtemp(prefix="laterite-pg-"))
        self.data = self.dir / "data"
        self.port = _free_port()
        self.as_postgres: list[str] = []
        if os.geteuid() == 0:
            # PostgreSQL refuses to run as root.
            pw = __import__("pwd").getpwnam("postgres")
            os.chown(self.dir, pw.pw_uid, pw.pw_gid)
            self.as_postgres = ["runuser", "-u", "postgres", "--"]

    def _run(self, *command: str) -> None:
        subprocess.run([*self.as_postgres, *command], check=True, capture_output=True,
                       timeout=120)

    def init(self) -> None:
        self._run(str(self.bindir / "initdb"), "-D", str(self.data), "-U", "postgres",
                  "-A", "trust", "-E", "UTF8", "--no-sync")

    def start(self) -> None:
        options = (f"-p {self.port} -k {self.dir} -c listen_addresses=127.0.0.1 "
                   f"-c fsync=off -c full_page_writes=off")
        self._run(str(self.bindir / "pg_ctl"), "-D", str(self.data), "-o", options,
                  "-l", str(self.dir / "log"), "-w", "start")

    def stop(self, mode: str = "fast") -> None:
        self._run(str(self.bindir / "pg_ctl"), "-D", str(self.data), "-m", mode, "-w", "stop")

    def remove(self) -> None:
        with contextlib.suppress(subprocess.CalledProcessError):
            self.stop("immediate")
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    bindir = _server_bin()
    if bindir is None:
        pytest.skip("PostgreSQL server binaries (/usr/lib/postgresql/*/bin) are not installed")
    server = Cluster(bindir)
    try:
        server.init()
        server.start()
        yield server
    finally:
        server.remove()


def test_workers_recover_from_a_postgresql_restart(cluster):
    import psycopg

    total = 300
    env = dict(os.environ)
    for name in ("LATERITE_TEST_DB_NAME", "LATERITE_PG_TEST_NAME", "LATERITE_TEST_STORE"):
        env.pop(name, None)
    env.update(
        DJANGO_SETTINGS_MODULE="tests.settings", PYTHONPATH=str(ROOT), PYTHONUNBUFFERED="1",
        LATERITE_TEST_DB="postgres", LATERITE_PG_HOST="127.0.0.1",
        LATERITE_PG_PORT=str(cluster.port), LATERITE_PG_NAME="laterite_restart",
        LATERITE_TEST_RETRY_AFTER="5", LATERITE_TEST_LOG_LEVEL="WARNING",
    )
    dsn = f"host=127.0.0.1 port={cluster.port} user=postgres"
    with psycopg.connect(f"{dsn} dbname=postgres", autocommit=True) as conn:
        conn.execute("CREATE DATABASE laterite_restart")

    def django(*args: str) -> None:
        subprocess.run([sys.executable, "-m", "django", *args], cwd=ROOT, env=env, check=True,
                       capture_output=True, timeout=120)

    def query(sql: str) -> int:
        with psycopg.connect(f"{dsn} dbname=laterite_restart", connect_timeout=5) as conn:
            return conn.execute(sql).fetchone()[0]

    def ran() -> int:
        return query("SELECT COUNT(DISTINCT value) FROM testapp_record WHERE kind = 'sturdy'")

    django("migrate", "-v0")
    subprocess.run(
        [sys.executable, "-c", "import django; django.setup(); from tests.testapp.jobs import "
         f"sturdy; sturdy.push_many([(i,) for i in range({total})])"],
        cwd=ROOT, env=env, check=True, timeout=120,
    )
    log = cluster.dir / "workers.log"
    with open(log, "w") as err:
        proc = subprocess.Popen([sys.executable, "-m", "django", "queue_work", "--processes",
                                 "2"], cwd=ROOT, env=env, stdout=err, stderr=err, text=True)
    try:
        wait_for(lambda: ran() >= total // 4, timeout=60)
        before = worker_pids(proc)
        cluster.stop("fast")  # every connection is cut
        time.sleep(2)
        cluster.start()
        wait_for(lambda: ran() == total and query("SELECT COUNT(*) FROM laterite_job") == 0,
                 timeout=120, every=0.5)
        assert worker_pids(proc) == before  # recovered in place: none died
        assert query("SELECT COUNT(*) FROM laterite_failed_job") == 0
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
    finally:
        kill_tree(proc)
    text = log.read_text()
    print(f"\n{total} jobs across a restart; {text.count('Store unavailable')} "
          f"'store unavailable' warnings")
    assert "Store unavailable" in text  # they did see it go
    # Reconnected, not stuck retrying a dead connection.
    assert text.count("connection already closed") < 10, text[-3000:]
