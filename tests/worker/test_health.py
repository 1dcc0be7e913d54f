"""`queue_work --health-port`: /livez and /readyz of real worker processes, with their
store taken away and brought back (a redis-server and a PgBouncer of the test's own:
the machine's PostgreSQL and Redis are never stopped)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.db import connection

from laterite_django.exceptions import StoreUnavailable
from laterite_django.worker.health import HealthServer
from tests.conftest import Stderr, wait_for

__all__: list[str] = []

# The first port tried for the test's own redis-server (the next free one is taken).
REDIS_PORT = int(os.environ.get("LATERITE_TEST_HEALTH_REDIS_PORT", "7400"))
# A probe's period as a Kubernetes probe would have it: every test below looks once.
PROBE_PERIOD = 10.0


def free_port(start: int = 0) -> int:
    """`start` or the next port above it that is free (0: any free port)."""
    port = start
    while True:
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                port += 1
                continue
            return sock.getsockname()[1]


def probe(port: int, path: str) -> tuple[int, str]:
    """GET http://127.0.0.1:PORT/PATH once, as a probe does: (status, body)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}",
                                    timeout=PROBE_PERIOD) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def serving(port: int, proc: subprocess.Popen, stderr: Stderr):
    def look() -> bool:
        if proc.poll() is not None:
            pytest.fail(f"queue_work ended: {stderr.text()}")
        try:
            return probe(port, "/livez")[0] == 200
        except OSError:
            return False
    return look


def stop(proc: subprocess.Popen, stderr: Stderr) -> None:
    proc.terminate()
    assert proc.wait(30) == 0, stderr.text()


class OwnRedis:
    """A redis-server of the test's own, stopped and started again on its port."""

    def __init__(self, directory: Path) -> None:
        self.port = free_port(REDIS_PORT)
        self.directory = directory
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        self.proc = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", str(self.directory)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for(self.answers, timeout=20)

    def answers(self) -> bool:
        import redis

        try:
            return bool(redis.Redis(port=self.port, socket_timeout=1).ping())
        except redis.exceptions.ConnectionError:
            return False

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


@pytest.fixture
def own_redis(tmp_path: Path) -> Iterator[OwnRedis]:
    if shutil.which("redis-server") is None:
        pytest.skip("redis-server is not installed")
    server = OwnRedis(tmp_path)
    server.start()
    try:
        yield server
    finally:
        server.kill()


def outage_and_return(port: int, take_away, bring_back) -> None:
    """The probes before, during and after an outage of the store: /readyz says 503 at its
    first look after the store went, /livez stays 200, and /readyz says 200 again at its
    first look after the store is back."""
    assert probe(port, "/readyz") == (200, "ok\n")
    take_away()
    status, said = probe(port, "/readyz")
    assert status == 503, said
    assert "cannot be reached" in said or "unavailable" in said.lower(), said
    assert probe(port, "/livez") == (200, "ok\n")  # the loop turns on, waiting for it
    bring_back()
    assert probe(port, "/readyz") == (200, "ok\n")
    assert probe(port, "/livez") == (200, "ok\n")


# -- the real worker processes ------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("store_kind", ["redis"], indirect=True)
@pytest.mark.parametrize("processes", ["1", "2"])
def test_readyz_follows_redis_away_and_back(own_redis, workers, processes):
    port = free_port()
    proc = workers.start("--health-port", str(port), "--processes", processes,
                         env={"LATERITE_REDIS_URL": f"redis://127.0.0.1:{own_redis.port}/0",
                              "LATERITE_TEST_RETRY_AFTER": "3"})
    stderr = Stderr(proc)
    wait_for(serving(port, proc, stderr), timeout=60)
    outage_and_return(port, own_redis.kill, own_redis.start)
    stop(proc, stderr)


@pytest.mark.slow
@pytest.mark.parametrize("store_kind", ["database"], indirect=True)
def test_readyz_follows_postgres_away_and_back(workers):
    if connection.vendor != "postgresql":
        pytest.skip("PostgreSQL behind a PgBouncer of the test's own (LATERITE_TEST_DB=postgres)")
    from bench.hosts.install import missing_reason
    from bench.hosts.pgbouncer import PgBouncer

    reason = missing_reason("pgbouncer")
    if reason:
        pytest.skip(f"PgBouncer cannot be had here: {reason}")
    settings = connection.settings_dict
    bouncers = [PgBouncer(server_host=settings["HOST"], server_port=int(settings["PORT"])).start()]
    bouncer_port = bouncers[0].port

    def again() -> None:
        bouncers.append(PgBouncer(server_host=settings["HOST"], port=bouncer_port,
                                  server_port=int(settings["PORT"])).start())

    port = free_port()
    try:
        proc = workers.start("--health-port", str(port),
                             env={"LATERITE_PG_HOST": bouncers[0].listen,
                                  "LATERITE_PG_PORT": str(bouncer_port),
                                  "LATERITE_TEST_RETRY_AFTER": "3"})
        stderr = Stderr(proc)
        wait_for(serving(port, proc, stderr), timeout=60)
        outage_and_return(port, bouncers[0].stop, again)
        stop(proc, stderr)
    finally:
        for bouncer in bouncers:
            bouncer.stop()


@pytest.mark.slow
def test_a_worker_on_any_store_is_live_and_ready(workers):
    port = free_port()
    proc = workers.start("--health-port", str(port), "--health-address", "127.0.0.1",
                         env={"LATERITE_TEST_LOG_LEVEL": "INFO"})
    stderr = Stderr(proc)
    wait_for(serving(port, proc, stderr), timeout=60)
    assert probe(port, "/livez") == (200, "ok\n")
    assert probe(port, "/readyz") == (200, "ok\n")
    assert probe(port, "/metrics")[0] == 404
    stop(proc, stderr)
    assert "Serving health probes on 127.0.0.1:" in stderr.text()


def test_health_address_needs_health_port(workers):
    result = workers.command("queue_work", "--health-address", "127.0.0.1", "--once")
    assert result.returncode != 0
    assert "--health-address 127.0.0.1 needs --health-port" in result.stderr


# -- the server itself ----------------------------------------------------------------


class StoreAway:
    """A store whose ping fails as a store out of reach does."""

    def ping(self) -> None:
        raise StoreUnavailable("The database store cannot be reached: refused")


def test_livez_says_why_the_loop_is_stuck_and_readyz_what_the_store_said():
    stuck: list[str] = []
    server = HealthServer(0, address="127.0.0.1", store=StoreAway)  # type: ignore[arg-type]
    try:
        assert probe(server.port, "/livez") == (200, "ok\n")  # before the loop: starting
        server.watch(lambda: stuck[0] if stuck else None)
        assert probe(server.port, "/livez") == (200, "ok\n")
        stuck.append("the worker's heartbeat thread has not turned for 61 s")
        assert probe(server.port, "/livez") == (
            503, "the worker's heartbeat thread has not turned for 61 s\n")
        assert probe(server.port, "/readyz") == (
            503, "The database store cannot be reached: refused\n")
        assert probe(server.port, "/nothing")[0] == 404
    finally:
        server.close()


def test_a_stuck_heartbeat_is_said(store):
    from laterite_django.worker.loop import Worker

    worker = Worker(["default"])
    assert worker.heartbeat.stuck(60) is None  # not started
    worker.heartbeat.start()
    try:
        assert worker.heartbeat.stuck(60) is None
        worker.heartbeat.turned_at = time.monotonic() - 90
        assert "has not turned for 90 s" in (worker.heartbeat.stuck(60) or "")
    finally:
        worker.heartbeat.stop()
    assert worker.heartbeat.stuck(60) == "the worker's heartbeat thread has stopped"
