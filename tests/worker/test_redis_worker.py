"""Real workers on Redis: a Redis server restarted or cutting their connections under
them, Redis down at start-up, and several processes draining one queue.

The restart and connection tests run their own `redis-server` on a free port (the
shared one on 6379 is never touched); they are marked slow and run in CI all the same.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.conf import settings
from django.test import override_settings

from laterite_django.models import FailedJob
from laterite_django.stores import get_store, reset_store
from tests.conftest import ROOT, Stderr, redis_store_only, wait_for
from tests.testapp import jobs
from tests.testapp.models import Record

__all__: list[str] = []

PREFIX = f"laterite-test-redisw-{os.getpid()}"
QUICK = {"LATERITE_TEST_RETRY_AFTER": "3"}


@pytest.fixture
def store_kind() -> Iterator[str]:
    """Only the Redis store here (the shared suites run every store)."""
    with redis_store_only(PREFIX) as kind:
        yield kind


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class RedisServer:
    """A private redis-server on a free port; with `persist`, every write reaches its
    append-only file before the reply, so a crash and restart keeps every job."""

    def __init__(self, directory: Path, *, persist: bool) -> None:
        self.port = free_port()
        self.directory = directory
        self.persist = persist
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        persistence = (
            ["--appendonly", "yes", "--appendfsync", "always"]
            if self.persist
            else ["--appendonly", "no"]
        )
        self.proc = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1",
             "--save", "", *persistence, "--dir", str(self.directory)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        wait_for(self._answers, timeout=20)

    def _answers(self) -> bool:
        import redis

        try:
            return bool(redis.Redis(port=self.port, socket_timeout=1).ping())
        except redis.exceptions.ConnectionError:
            return False

    def kill(self) -> None:
        """Crash it (SIGKILL): only what reached its append-only file survives."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def client(self):
        import redis

        return redis.Redis(port=self.port, socket_timeout=5)


def need_redis_server() -> None:
    if shutil.which("redis-server") is None:
        pytest.skip("redis-server is not installed")


@pytest.fixture
def own_redis(tmp_path: Path, transactional_db: None, store_kind: str) -> Iterator[callable]:
    """Start a private Redis server and point this process's `redis` cache at it.

    It asks for `store_kind` so that fixture's settings are made before these and
    restored after them: settings overrides must be undone in the reverse order, or
    the last one undone brings back the settings it saw (the Redis store's, for
    every later test).
    """
    need_redis_server()
    servers: list[RedisServer] = []
    overrides: list[override_settings] = []

    def make(*, persist: bool = False) -> RedisServer:
        server = RedisServer(tmp_path, persist=persist)
        server.start()
        servers.append(server)
        caches = {**settings.CACHES, "redis": {**settings.CACHES["redis"], "LOCATION": server.url}}
        override = override_settings(CACHES=caches)
        override.enable()
        overrides.append(override)
        reset_store()
        return server

    try:
        yield make
    finally:
        for override in reversed(overrides):
            override.disable()
        for server in servers:
            server.kill()
        reset_store()


def ran(kind: str) -> Counter:
    return Counter(Record.objects.filter(kind=kind).values_list("value", flat=True))


def stop(proc: subprocess.Popen, stderr: Stderr) -> str:
    proc.send_signal(signal.SIGTERM)
    proc.wait(30)
    stderr._thread.join(10)
    assert proc.returncode == 0, stderr.text()
    return stderr.text()


# -- Redis away ------------------------------------------------------------------


def test_queue_status_says_redis_is_down_and_exits_non_zero(workers):
    dead = f"redis://127.0.0.1:{free_port()}/0"
    result = subprocess.run(
        [sys.executable, "-m", "django", "queue_status"], cwd=ROOT, capture_output=True,
        text=True, timeout=60, env=workers.env(LATERITE_REDIS_URL=dead),
    )
    assert result.returncode != 0
    assert "cannot be reached" in result.stderr and "'redis'" in result.stderr


@pytest.mark.slow
def test_worker_started_while_redis_is_down_waits_for_it(workers, tmp_path):
    need_redis_server()
    port = free_port()
    env = {"LATERITE_REDIS_URL": f"redis://127.0.0.1:{port}/0"}
    proc = workers.start(env=env)
    stderr = Stderr(proc)
    wait_for(lambda: "cannot be reached" in stderr.text(), timeout=30)
    time.sleep(1.5)  # it keeps retrying, with backoff, rather than exiting
    assert proc.poll() is None, stderr.text()
    server = RedisServer(tmp_path, persist=False)
    server.port = port
    server.start()
    try:
        with override_settings(
            CACHES={**settings.CACHES, "redis": {**settings.CACHES["redis"],
                                                 "LOCATION": env["LATERITE_REDIS_URL"]}}
        ):
            reset_store()
            jobs.record.push("after")
            wait_for(lambda: ran("record") == {"after": 1}, timeout=60)
            reset_store()
        text = stop(proc, stderr)
        assert "waiting for it to come back" in text and "Store unavailable" in text
    finally:
        server.kill()


# -- restarts and dropped connections ----------------------------------------------


@pytest.mark.slow
def test_worker_recovers_from_a_redis_crash_and_restart(own_redis, workers):
    server = own_redis(persist=True)
    jobs.sturdy.push_many([(i,) for i in range(150)])  # 20 ms each
    proc = workers.start(env={"LATERITE_REDIS_URL": server.url, **QUICK})
    stderr = Stderr(proc)
    wait_for(lambda: len(ran("sturdy")) >= 20, timeout=60)
    server.kill()
    time.sleep(1.5)  # the worker finds Redis gone and backs off
    server.start()
    wait_for(lambda: len(ran("sturdy")) == 150, timeout=120)
    # Every job ran; the one in hand at the crash may have run twice (at least once).
    counts = ran("sturdy")
    assert set(counts) == {str(i) for i in range(150)}
    assert sum(counts.values()) - 150 <= 2
    wait_for(lambda: get_store().counts() == {}, timeout=30)
    assert FailedJob.objects.count() == 0
    assert proc.poll() is None  # the same process recovered by itself
    assert "Store unavailable" in stop(proc, stderr)


@pytest.mark.slow
def test_worker_recovers_when_redis_drops_its_connections(own_redis, workers):
    server = own_redis(persist=False)
    admin = server.client()
    proc = workers.start(env={"LATERITE_REDIS_URL": server.url, **QUICK})
    stderr = Stderr(proc)
    for round_ in range(3):
        jobs.sturdy.push_many([(f"{round_}-{i}",) for i in range(40)])
        wait_for(lambda r=round_: len(ran("sturdy")) >= 40 * r + 10, timeout=60)
        # Kill every client connection but ours: the worker's blocking wait, its
        # heartbeat and whatever command was in flight.
        admin.client_kill_filter(_type="normal", skipme=True)
        time.sleep(0.3)
    wait_for(lambda: len(ran("sturdy")) == 120, timeout=120)
    counts = ran("sturdy")
    assert set(counts) == {f"{r}-{i}" for r in range(3) for i in range(40)}
    wait_for(lambda: get_store().counts() == {}, timeout=30)
    # Idle now: the worker blocks on Redis again and wakes for a new push.
    admin.client_kill_filter(_type="normal", skipme=True)
    jobs.sturdy.push("last")
    wait_for(lambda: ran("sturdy")["last"] == 1, timeout=60)
    assert proc.poll() is None
    stop(proc, stderr)


# -- several workers ---------------------------------------------------------------


@pytest.mark.slow
def test_several_worker_processes_run_each_of_thousands_of_jobs_once(store, workers):
    total = 2000
    jobs.record.push_many([(str(i),) for i in range(total)])
    procs = [workers.start("--stop-when-empty", "--batch", "5") for _ in range(3)]
    for proc in procs:
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
    counts = ran("record")
    assert len(counts) == total and set(counts.values()) == {1}
    pids = set(Record.objects.values_list("pid", flat=True))
    assert len(pids) >= 2  # the work was shared
    assert store.counts() == {}
