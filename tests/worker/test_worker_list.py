"""The live workers' list with real `queue_work` processes, on every store: each process
is listed while it runs (with the job in its hand), taken off the list at a clean stop,
and shown lost once a killed one stops beating."""

from __future__ import annotations

import json
import signal
import socket

import pytest

from laterite_django import __version__
from laterite_django.stores import get_store
from tests.conftest import Stderr, wait_for
from tests.testapp import jobs
from tests.testapp.models import Record

pytestmark = pytest.mark.slow

QUICK = {"LATERITE_TEST_RETRY_AFTER": "3"}


def listed(pids: set[int]):
    """The entries of processes `pids`, once every one of them is listed."""
    def look():
        found = {w.pid: w for w in get_store().workers() if w.pid in pids}
        return found if set(found) == pids else None
    return look


def test_a_worker_is_listed_while_it_runs_and_leaves_at_its_stop(workers, store):
    jobs.sleeper.push(4, "held")
    proc = workers.start("--queue", "default", "--queue", "mail", env=QUICK)
    stderr = Stderr(proc)
    wait_for(lambda: Record.objects.filter(kind="sleeper-start").exists()
             or (proc.poll() is not None and pytest.fail(stderr.text())), timeout=60)
    entries = wait_for(listed({proc.pid}))
    entry = entries[proc.pid]
    assert entry.id == f"{socket.gethostname()}:{proc.pid}"
    assert entry.name == entry.id  # no --name: claimed_by is host:pid too
    assert entry.host == socket.gethostname()
    assert entry.version == __version__
    assert entry.queues == ["default", "mail"]
    assert entry.concurrency == 1
    # The job in hand shows by the next beat (every RETRY_AFTER / 3 = 1 s here).
    [running] = store.running()
    wait_for(lambda: listed({proc.pid})()[proc.pid].jobs == [running.id], timeout=10)
    assert not wait_for(listed({proc.pid}))[proc.pid].lost(3)

    proc.send_signal(signal.SIGTERM)  # finish the job in hand, then stop
    assert proc.wait(30) == 0, stderr.text()
    assert [w for w in store.workers() if w.pid == proc.pid] == []


def test_each_process_of_a_supervisor_is_listed(workers, store):
    proc = workers.start("--processes", "2", "--name", "pool", env=QUICK)
    stderr = Stderr(proc)

    def children() -> list:
        found = [w for w in get_store().workers() if w.name.startswith("pool-")]
        return found if len(found) == 2 else []

    found = wait_for(lambda: children() or (proc.poll() is not None and pytest.fail(
        stderr.text())))
    assert sorted(w.name for w in found) == ["pool-0", "pool-1"]
    assert proc.pid not in {w.pid for w in found}  # the supervisor runs no job
    assert len({w.pid for w in found}) == 2
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(30) == 0, stderr.text()
    assert [w for w in store.workers() if w.name.startswith("pool-")] == []


def test_a_killed_worker_is_shown_lost(workers, store):
    proc = workers.start(env=QUICK)
    wait_for(listed({proc.pid}))
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)
    entry = wait_for(lambda: [w for w in get_store().workers()
                              if w.pid == proc.pid and w.lost(3)], timeout=15)[0]
    assert entry.age > 3
    # queue_workers says so too.
    result = workers.command("queue_workers", "--json", env=QUICK)
    assert result.returncode == 0, result.stderr
    [shown] = [w for w in json.loads(result.stdout)["workers"] if w["pid"] == proc.pid]
    assert shown["lost"] is True
    table = workers.command("queue_workers", env=QUICK)
    assert table.returncode == 0, table.stderr
    [line] = [line for line in table.stdout.splitlines() if f" {proc.pid} " in line]
    assert line.split()[-1] == "lost"
    assert "1 lost" in table.stdout.splitlines()[-1]
