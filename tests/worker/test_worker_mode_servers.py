"""The `worker` mode under real web servers: gunicorn (pre-forking, WSGI) and uvicorn (ASGI).

Each test starts the server as a subprocess on the test database and store,
with two worker threads per process and a one-second shutdown grace, and
checks where the jobs ran and how they ended. Jobs hold while a file exists:
some in one long C sleep (a thread cannot be cut off there), some in short
sleeps (cut off at the next bytecode).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import urllib.request
from collections import Counter
from pathlib import Path

import psutil
import pytest

from tests.conftest import ROOT, wait_for
from tests.testapp import jobs
from tests.worker.test_processes import kill_tree, kinds, worker_pids, workers_if

__all__: list[str] = []

pytestmark = [pytest.mark.slow, pytest.mark.servers]

SERVER_ENV = {
    "LATERITE_TEST_MODE": "worker",
    "LATERITE_TEST_WORKERS": "2",  # threads per web process
    "LATERITE_TEST_SHUTDOWN_GRACE": "1",
    "LATERITE_TEST_LOG_LEVEL": "INFO",
}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Server:
    """A web server subprocess on a free port; its output goes to a file."""

    def __init__(self, workers, tmp_path: Path, *argv: str) -> None:
        self.port = free_port()
        self.log = tmp_path / "server.log"
        argv = tuple(arg.replace("{port}", str(self.port)) for arg in argv)
        with self.log.open("w") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", *argv], cwd=ROOT, env=workers.env(**SERVER_ENV),
                stdout=out, stderr=subprocess.STDOUT,
            )

    def get(self, path: str = "/ping/") -> str | None:
        """GET `path`; its body, or None while the server does not answer."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}{path}", timeout=5) as r:
                return r.read().decode()
        except OSError:
            return None

    def output(self) -> str:
        return self.log.read_text()

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 45) -> int:
        """Send `sig` and wait for the server to exit; return its exit code."""
        self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            kill_tree(self.proc)
            pytest.fail(f"the server did not exit within {timeout} s:\n{self.output()}")


@pytest.fixture
def servers(workers, tmp_path):
    """Start web servers; every one left is killed, with its children, at the end."""
    started: list[Server] = []

    def start(*argv: str) -> Server:
        server = Server(workers, tmp_path, *argv)
        started.append(server)
        return server

    yield start
    for server in started:
        kill_tree(server.proc)


def gunicorn(*extra: str) -> tuple[str, ...]:
    return ("gunicorn", "--workers", "2", "--bind", "127.0.0.1:{port}", *extra,
            "tests.wsgi:application")


def counts(store):
    """(waiting, running) on the default queue."""
    queue = store.counts().get("default")
    return (0, 0) if queue is None else (queue.waiting, queue.running)


def hold_file(tmp_path: Path) -> Path:
    path = tmp_path / "hold"
    path.touch()
    return path


def runs(kind: str) -> Counter:
    """How many times each (value, attempt) was recorded as `kind`."""
    return Counter((value, attempt) for value, attempt, _ in kinds(kind))


def started_twice(values: list[str]) -> Counter:
    """Each job started as attempt 1, was stopped and given back (not charged a try),
    then started again under a new number, 2."""
    return Counter({(value, attempt): 1 for value in values for attempt in (1, 2)})


def each_ran_once_more(workers, values: list[str]) -> None:
    """A `queue_work` runs what the server gave back: each job once, as attempt 2."""
    result = workers.run("--stop-when-empty", "--processes", "1")
    assert result.returncode == 0, result.stderr
    assert runs("hold-end") == Counter({(value, 2): 1 for value in values})
    assert runs("hold-start") == started_twice(values)


def test_gunicorn_sigterm_returns_the_jobs_in_hand_uncounted(store, workers, servers, tmp_path):
    path = hold_file(tmp_path)
    values = ["c-0", "c-1", "py-0", "py-1"]
    for value in values:
        jobs.hold.push(value, str(path), 60 if value.startswith("c") else 0.05)
    server = servers(*gunicorn())

    # Nothing here pushes: requests start each web process's threads.
    def all_running() -> bool:
        server.get()
        return len(kinds("hold-start")) == 4

    wait_for(all_running, timeout=45, every=0.2)
    children = worker_pids(server.proc)
    assert {pid for _, _, pid in kinds("hold-start")} <= children  # never the master

    assert server.stop(signal.SIGTERM) == 0
    # Back on the queue at once, not charged a try; none ran to its end.
    assert counts(store) == (4, 0), server.output()
    assert kinds("hold-end") == []
    assert "shutdown grace: stopping it now" in server.output()
    path.unlink()
    each_ran_once_more(workers, values)


def test_gunicorn_hup_new_workers_run_the_jobs_pushed_before(store, workers, servers, tmp_path):
    path = hold_file(tmp_path)
    # post_worker_init (tests/gunicorn_conf.py) starts the threads as each worker boots.
    server = servers(*gunicorn("--config", "tests/gunicorn_conf.py"))
    old = wait_for(lambda: workers_if(server.proc, 2), timeout=45)
    held = [f"held-{i}" for i in range(4)]
    for value in held:  # every thread busy...
        jobs.hold.push(value, str(path), 0.05)
    wait_for(lambda: len(kinds("hold-start")) == 4, timeout=45)
    for value in ["queued-0", "queued-1"]:  # ...so these wait
        jobs.record.push(value)

    server.proc.send_signal(signal.SIGHUP)
    new = wait_for(lambda: (pids := workers_if(server.proc, 2)) and not pids & old and pids,
                   timeout=45)
    path.unlink()
    # No push and no request since the restart: the new workers run every job.
    wait_for(lambda: len(kinds("record")) == 2 and len(kinds("hold-end")) == 4, timeout=45)
    assert sorted((v, a) for v, a, _ in kinds("record")) == [("queued-0", 1), ("queued-1", 1)]
    assert {pid for _, _, pid in kinds("record")} <= new
    assert runs("hold-end") == Counter({(value, 2): 1 for value in held})
    assert {pid for _, _, pid in kinds("hold-end")} <= new
    # The old workers were cut off and gave their jobs back, not charged a try.
    assert runs("hold-start") == started_twice(held)
    assert server.stop(signal.SIGTERM) == 0


def test_uvicorn_sigterm_returns_the_jobs_in_hand_uncounted(store, workers, servers, tmp_path):
    path = hold_file(tmp_path)
    values = ["c-0", "py-0"]
    for value in values:
        jobs.hold.push(value, str(path), 60 if value.startswith("c") else 0.05)
    # tests/asgi.py wraps the application: the lifespan starts the threads, no request.
    server = servers("uvicorn", "--host", "127.0.0.1", "--port", "{port}",
                     "tests.asgi:application")
    wait_for(lambda: len(kinds("hold-start")) == 2, timeout=45)
    assert {pid for _, _, pid in kinds("hold-start")} == {server.proc.pid}

    # uvicorn ends by raising the signal again: no exit handler runs after its shutdown.
    assert server.stop(signal.SIGTERM) in (0, -signal.SIGTERM)
    assert counts(store) == (2, 0), server.output()
    assert kinds("hold-end") == []
    assert "shutdown grace: stopping it now" in server.output()
    assert not psutil.pid_exists(server.proc.pid)
    path.unlink()
    each_ran_once_more(workers, values)


def test_runserver_reload_returns_the_jobs_in_hand_uncounted(store, workers, servers, tmp_path):
    path = hold_file(tmp_path)
    values = ["c-0", "py-0"]
    for value in values:
        jobs.hold.push(value, str(path), 60 if value.startswith("c") else 0.05)
    server = servers("django", "runserver", "127.0.0.1:{port}")
    wait_for(lambda: server.get() and len(kinds("hold-start")) == 2, timeout=45, every=0.2)
    (served,) = {pid for _, _, pid in kinds("hold-start")}  # the autoreloader's child

    # A source file changes: the child exits (code 3) and the autoreloader starts another.
    urls = ROOT / "tests" / "urls.py"
    os.utime(urls, (urls.stat().st_atime, urls.stat().st_mtime + 10))
    # Its threads get LATERITE_QUEUE_SHUTDOWN_GRACE, then give their jobs back: on a
    # loaded machine SQLite's write lock can make that slow, never endless.
    wait_for(lambda: not psutil.pid_exists(served), timeout=90)
    assert counts(store) == (2, 0), server.output()
    assert kinds("hold-end") == []

    # The new child runs them once asked for a page, each as attempt 2.
    path.unlink()
    wait_for(lambda: server.get() and len(kinds("hold-end")) == 2, timeout=45, every=0.2)
    assert runs("hold-end") == Counter({(value, 2): 1 for value in values})
    assert runs("hold-start") == started_twice(values)
    assert served not in {pid for _, _, pid in kinds("hold-end")}
