"""Fixtures: the store under test (every store), and real worker subprocesses."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from django.db import connection
from django.test import override_settings

from bench.hosts.redis_cluster import RedisClusterSet
from laterite_django.stores import get_store, reset_store

ROOT = Path(__file__).resolve().parent.parent

# A suite started in the background of a shell (`nohup ... &`) inherits SIGINT ignored,
# and so would every process its tests start: Python installs no KeyboardInterrupt
# handler in a process started with SIGINT ignored, and the tests that press Ctrl-C in
# a worker or a command would wait on it in vain. Handled here, SIGINT is back to its
# default in each process the tests start (exec resets a handled signal).
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

# Every store-level behaviour runs against each of these (LATERITE_TEST_STORES,
# database,redis by default; each nox leg names its own: noxfile.LEGS). `redis_cluster`
# is the Redis store on a Redis Cluster of the session's own (the `redis_cluster`
# fixture), never in the default list.
STORES = os.environ.get("LATERITE_TEST_STORES", "database,redis").split(",")
# The first of the six loopback ports of that cluster (tests/settings.py's
# 'redis_cluster' cache points there).
CLUSTER_PORT = int(os.environ.get("LATERITE_TEST_CLUSTER_PORT", "7400"))


# LATERITE_TEST_STORE_TESTS_ONLY=1: only the tests that run once per store (those taking
# the `store_kind` fixture), in a leg that runs the suite again on another store beside
# a leg that ran the rest (noxfile.LEGS).
STORE_TESTS_ONLY = os.environ.get("LATERITE_TEST_STORE_TESTS_ONLY") == "1"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Leave out the tests that do not run per store when STORE_TESTS_ONLY is set."""
    if not STORE_TESTS_ONLY:
        return
    kept = [item for item in items if "store_kind" in getattr(item, "fixturenames", ())]
    if len(kept) < len(items):
        config.hook.pytest_deselected(items=[item for item in items if item not in kept])
        items[:] = kept


def job_hashes(client, prefix: str) -> set[bytes]:
    """The keys of the job hashes under `prefix`, each once: SCAN may return a key
    more than once while Redis resizes its table (other tests write to the same
    server at the same time)."""
    return {key for key in client.scan_iter(f"{prefix}:job:*") if client.type(key) == b"hash"}


def flush_redis(prefix: str) -> None:
    """Delete every key under `prefix` on the shared test Redis."""
    from django_redis import get_redis_connection

    client = get_redis_connection("redis", write=True)
    keys = list(client.scan_iter(match=f"{prefix}:*", count=1000))
    if keys:
        client.delete(*keys)


def flush_redis_cluster(prefix: str) -> None:
    """Delete every key under the hash tag `{prefix}` on the session's Redis Cluster."""
    from laterite_django.stores.redis.cluster import cluster_client, node_client

    tag = "{" + prefix + "}"
    client = node_client(cluster_client("redis_cluster"), tag)
    keys = list(client.scan_iter(match=f"{tag}:*", count=1000))
    if keys:
        client.delete(*keys)


# What LATERITE_QUEUE_* a store kind of STORES sets.
STORE_SETTINGS = {
    "database": {"LATERITE_QUEUE_STORE": "database"},
    "redis": {"LATERITE_QUEUE_STORE": "redis"},
    "redis_cluster": {"LATERITE_QUEUE_STORE": "redis", "LATERITE_QUEUE_REDIS": "redis_cluster",
                      "LATERITE_QUEUE_REDIS_CLUSTER": True},
}


@contextlib.contextmanager
def redis_store_only(prefix: str, *also_flush: str) -> Iterator[str]:
    """The Redis store under its own `prefix` for a test of Redis only; its keys (and
    those under `also_flush`) are deleted before and after."""
    with override_settings(LATERITE_QUEUE_STORE="redis", LATERITE_QUEUE_PREFIX=prefix):
        reset_store()
        flush_redis(prefix)
        try:
            yield "redis"
        finally:
            reset_store()
            for name in (prefix, *also_flush):
                flush_redis(name)


@pytest.fixture(scope="session")
def redis_cluster() -> Iterator[RedisClusterSet]:
    """A Redis Cluster of the session's own: six `redis-server --cluster-enabled yes`
    on loopback ports CLUSTER_PORT..+5 (3 primaries, 3 replicas), ready
    (cluster_state:ok) before the first test that needs it, stopped after the last."""
    if shutil.which("redis-server") is None or shutil.which("redis-cli") is None:
        pytest.skip("redis-server and redis-cli are not installed")
    with RedisClusterSet(CLUSTER_PORT) as cluster:
        yield cluster


@pytest.fixture(params=STORES)
def store_kind(request: pytest.FixtureRequest) -> Iterator[str]:
    """The name of the store under test, set as LATERITE_QUEUE_STORE for the test."""
    kind = request.param
    prefix = f"laterite-test-{os.getpid()}"
    flush = {"redis": flush_redis, "redis_cluster": flush_redis_cluster}.get(kind)
    if kind == "redis_cluster":
        request.getfixturevalue("redis_cluster")
    with override_settings(**STORE_SETTINGS[kind], LATERITE_QUEUE_PREFIX=prefix):
        reset_store()
        if flush is not None:
            flush(prefix)
        try:
            yield kind
        finally:
            if flush is not None:
                flush(prefix)
            reset_store()


@pytest.fixture
def store(store_kind: str, transactional_db: None):
    """The configured store, on a committed test database (workers can see it)."""
    store = get_store()
    yield store
    store.close()


class Workers:
    """Starts real `queue_work` subprocesses against the test database and store."""

    def __init__(self, store_kind: str) -> None:
        from django.conf import settings

        self.store_kind = store_kind
        self.prefix = settings.LATERITE_QUEUE_PREFIX
        self.procs: list[subprocess.Popen] = []

    def env(self, **extra: str) -> dict[str, str]:
        env = dict(os.environ)
        env.update(
            DJANGO_SETTINGS_MODULE="tests.settings",
            LATERITE_TEST_DB_NAME=str(connection.settings_dict["NAME"]),
            LATERITE_TEST_STORE=self.store_kind,
            LATERITE_TEST_PREFIX=self.prefix,
            PYTHONPATH=str(ROOT),
            PYTHONUNBUFFERED="1",
        )
        env.update(extra)
        return env

    def start(self, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen:
        """Start `manage.py queue_work ARGS` and return the process (stderr captured)."""
        proc = subprocess.Popen(
            [sys.executable, "-m", "django", "queue_work", *args],
            cwd=ROOT,
            env=self.env(**(env or {})),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.procs.append(proc)
        return proc

    def run(self, *args: str, timeout: float = 60, env: dict[str, str] | None = None
            ) -> subprocess.CompletedProcess:
        """Run `queue_work ARGS` to its end; fail the test if it hangs."""
        proc = self.start(*args, env=env)
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
            pytest.fail(f"queue_work {' '.join(args)} did not end in {timeout} s:\n{err}")
        return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)

    def command(self, *args: str, timeout: float = 60, input: str | None = None,
                env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
        """Run any manage.py command in a subprocess against the test database."""
        return subprocess.run(
            [sys.executable, "-m", "django", *args],
            cwd=ROOT, env=self.env(**(env or {})), capture_output=True, text=True,
            timeout=timeout, input=input,
        )

    def stop_all(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
            proc.communicate(timeout=10)  # reap it and close its pipes


@pytest.fixture
def workers(store_kind: str, transactional_db: None) -> Iterator[Workers]:
    pool = Workers(store_kind)
    try:
        yield pool
    finally:
        pool.stop_all()


class Stderr:
    """Collect a process's stderr in a thread, so it never blocks on a full pipe."""

    def __init__(self, proc: subprocess.Popen) -> None:
        self.lines: list[str] = []
        self._thread = threading.Thread(target=self._read, args=(proc,), daemon=True)
        self._thread.start()

    def _read(self, proc: subprocess.Popen) -> None:
        for line in proc.stderr:
            self.lines.append(line)

    def text(self) -> str:
        self._thread.join(10)
        return "".join(self.lines)


# The long runs (rounds of kills and signals, schedules run for many ticks) are cut
# short in a normal run; LATERITE_TEST_FULL=1 runs them whole.
FULL = os.environ.get("LATERITE_TEST_FULL") == "1"


def short_or_full(short: float, full: float) -> float:
    """`full` under LATERITE_TEST_FULL=1, else `short`."""
    return full if FULL else short


def wait_for(predicate: Callable[[], object], timeout: float = 30, every: float = 0.05) -> object:
    """Poll `predicate` until it returns something truthy; fail after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"Timed out after {timeout} s waiting for {predicate}")
        time.sleep(every)
