"""Two simulated hosts (network namespaces) x two worker processes on one PostgreSQL,
through PgBouncer in transaction pooling mode, idle workers listening on a direct
connection: one host's link is cut for longer than retry_after. Its jobs come back and
run on the other host; when the link returns, its late settles are refused by the claim
token, and it works again. The long version: `python -m bench.hosts` (bench/results/scale.md)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from django.db import connection

from bench.hosts.forward import Forwarder
from bench.hosts.install import missing_reason
from bench.hosts.netns import Host, Network, netns_problem
from bench.hosts.pgbouncer import PgBouncer
from bench.hosts.procs import free_port
from laterite_django.stores import get_store
from laterite_django.worker.loop import SETTLE_EVERY
from tests.conftest import ROOT, Workers, wait_for
from tests.testapp.models import Record

__all__: list[str] = []

pytestmark = [pytest.mark.parametrize("store_kind", ["database"], indirect=True), pytest.mark.slow]

RETRY_AFTER = 3.0
PROCESSES = 2
# The most finished jobs one worker process holds undeleted, whatever its batch.
BATCH = SETTLE_EVERY


@pytest.fixture
def network() -> Iterator[Network]:
    if connection.vendor != "postgresql":
        pytest.skip("the hosts share a PostgreSQL (LATERITE_TEST_DB=postgres)")
    reason = netns_problem() or missing_reason("pgbouncer")
    if reason:
        pytest.skip(f"simulated hosts cannot be made here: {reason}")
    with Network(2) as made:
        yield made


@pytest.fixture
def reach(network: Network) -> Iterator[dict[str, str]]:
    """PgBouncer and a plain forwarder (for LISTEN) on the bridge, in front of the test
    PostgreSQL; the environment that makes a host's processes use them."""
    server = connection.settings_dict
    bouncer = PgBouncer(server_host=server["HOST"], server_port=int(server["PORT"]),
                        listen=network.server, pool_size=8).start()
    forwarder = Forwarder(network.server, free_port(network.server), server["HOST"],
                          int(server["PORT"])).start()
    try:
        yield {
            "LATERITE_PG_HOST": network.server,
            "LATERITE_PG_PORT": str(bouncer.port),
            "LATERITE_TEST_LISTEN_PORT": str(forwarder.port),
            "LATERITE_TEST_RETRY_AFTER": str(RETRY_AFTER),
            "LATERITE_TEST_POLL": "0.2",
        }
    finally:
        network.destroy()  # the workers first, then what they talked to
        forwarder.stop()
        bouncer.stop()


def start_workers(host: Host, workers: Workers, env: dict[str, str], log: Path) -> None:
    """`queue_work --processes 2` on `host`, its output in `log`."""
    with log.open("w") as out:
        host.popen([sys.executable, "-m", "django", "queue_work", "--processes",
                    str(PROCESSES)], cwd=ROOT, env=workers.env(**env), stdout=out,
                   stderr=subprocess.STDOUT)


def pids(host: Host) -> set[int]:
    """The worker processes running on `host` (the supervisors and their children)."""
    found: set[int] = set()
    for proc in host.procs:
        try:
            main = psutil.Process(proc.pid)
            found |= {main.pid, *(child.pid for child in main.children(recursive=True))}
        except psutil.NoSuchProcess:
            pass
    return found


def push(values: list[str], seconds: float) -> None:
    from tests.hosts.jobs import work

    work.push_many([(value, seconds) for value in values])


def ended(values: list[str]) -> bool:
    done = set(Record.objects.filter(kind="hosts-end").values_list("value", flat=True))
    return done >= set(values)


def test_a_link_cut_longer_than_retry_after(network, reach, workers, transactional_db,
                                            tmp_path):
    h1, h2 = network.hosts
    start_workers(h1, workers, reach, tmp_path / "h1.log")
    start_workers(h2, workers, reach, tmp_path / "h2.log")
    first = [f"a{i}" for i in range(40)]
    push(first, 0.5)
    # Cut h1 while its workers hold jobs.
    h1_pids = wait_for(lambda: len(found := pids(h1)) > PROCESSES and found, timeout=60)
    wait_for(lambda: started_by(h1_pids), timeout=120)
    network.cut(h1)
    # Meanwhile h2 takes h1's claims once they are older than retry_after, and runs them.
    time.sleep(4 * RETRY_AFTER)
    network.restore(h1)
    wait_for(lambda: ended(first), timeout=180)

    # h1 works again: with h2 stopped, only h1 can run these.
    network.kill(h2, signal.SIGTERM)
    for proc in h2.procs:
        proc.wait(60)
    second = [f"b{i}" for i in range(4)]
    push(second, 0)
    wait_for(lambda: ended(second), timeout=120)
    network.kill(h1, signal.SIGTERM)
    for proc in h1.procs:
        proc.wait(60)

    ends = Counter(Record.objects.filter(kind="hosts-end").values_list("value", flat=True))
    assert set(ends) == set(first) | set(second)
    twice = {value: n for value, n in ends.items() if n > 1}
    # Only jobs h1 held when its link went can have run twice (once there, once on h2):
    # at most SETTLE_EVERY per worker process, and never three times.
    ran_on_h1 = started_by(h1_pids) & set(first)
    assert set(twice) <= ran_on_h1 and len(twice) <= PROCESSES * BATCH, (twice, ran_on_h1)
    assert all(n == 2 for n in twice.values()), twice
    # The late settles were refused: the queue holds nothing, and nothing failed.
    assert get_store().counts() == {}
    assert set(Record.objects.filter(kind="hosts-end", value__in=second)
               .values_list("pid", flat=True)) <= h1_pids
    log = (tmp_path / "h1.log").read_text()
    # h1's settles of those came late, after h2 had claimed and run them: refused.
    lost = sum(int(line.split(" finished job")[0].split()[-1])
               for line in log.splitlines() if "lost its claim" in line
               or "lost their claims" in line)
    assert lost == len(twice), log
    # The partition is said in one line per failed beat, not a traceback each.
    assert "Traceback" not in log, log


def started_by(pids_: set[int]) -> set[str]:
    return set(Record.objects.filter(kind="hosts-start", pid__in=pids_)
               .values_list("value", flat=True))
