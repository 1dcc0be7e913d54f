"""The `worker` mode: worker threads in this process run what it pushes, with the same loop."""

from __future__ import annotations

import ctypes
import os
import re
import signal
import subprocess
import sys
import textwrap
import threading
from wsgiref.util import setup_testing_defaults

import pytest
from django.core.handlers.wsgi import WSGIHandler
from django.test import override_settings

from laterite_django.checks import check_settings
from laterite_django.exceptions import LateriteConfigurationError
from laterite_django.models import FailedJob
from laterite_django.stores import get_store
from laterite_django.worker import threads
from tests.conftest import ROOT, wait_for
from tests.testapp import jobs
from tests.worker.test_processes import kinds, returned_attempts, waiting
from tests.worker.test_worker_mode_servers import counts

__all__: list[str] = []


@pytest.fixture
def worker_mode(store):
    """Worker mode with two threads; they are stopped before the database goes."""
    with override_settings(LATERITE_QUEUE_MODE="worker", LATERITE_QUEUE_WORKERS=2):
        try:
            yield store
        finally:
            threads.stop_all()


def test_a_push_starts_worker_threads_that_run_the_job(worker_mode):
    assert threads.running() == []
    jobs.record.push("threaded")
    jobs.add.push(1, 2)
    wait_for(lambda: kinds("record"))
    names = sorted(thread.name for thread in threads.running())
    assert names == ["laterite-worker-0", "laterite-worker-1"]
    assert kinds("record") == [("threaded", 1, os.getpid())]  # run here, not elsewhere
    wait_for(lambda: waiting(worker_mode) == 0)


def test_a_failing_job_retries_by_the_same_rules(worker_mode):
    jobs.flaky.push("again", 2)  # tries=3, backoff 0: fails once, then succeeds
    wait_for(lambda: kinds("flaky-ok"))
    assert [a for _, a, _ in kinds("flaky-attempt")] == [1, 2]
    wait_for(lambda: waiting(worker_mode) == 0)
    assert not FailedJob.objects.exists()


def test_a_spinning_job_ends_at_its_timeout_in_a_thread(worker_mode):
    jobs.spin.push()  # while True, timeout 0.5
    failed = wait_for(lambda: FailedJob.objects.filter(name="tests.spin").first())
    assert failed.error.startswith("JobTimeout: timed out after 0.5 s")
    # The thread that ran it lives on and takes the next job.
    jobs.record.push("after")
    wait_for(lambda: kinds("record"))
    assert len(threads.running()) == 2


def test_stop_all_finishes_the_jobs_in_hand(worker_mode):
    jobs.patient.push(0.5, "in-hand")
    wait_for(lambda: kinds("patient-start"))
    threads.stop_all()
    assert threads.running() == []
    assert [(v, a) for v, a, _ in kinds("patient-end")] == [("in-hand", 1)]
    assert waiting(worker_mode) == 0
    assert not any(t.name.startswith("laterite-worker") for t in threading.enumerate())


def test_a_forked_process_starts_threads_of_its_own(workers):
    # A pre-forking server: threads started before the fork do not exist in the child.
    script = textwrap.dedent("""
        import os, time, traceback, django
        django.setup()
        from django.db import connections
        from django.test import override_settings
        from laterite_django.worker import threads
        from tests.testapp import jobs
        from tests.testapp.models import Record

        def open_files():
            paths = []
            for fd in os.listdir("/proc/self/fd"):
                try:
                    paths.append(os.readlink(f"/proc/self/fd/{fd}"))
                except OSError:  # the listing's own descriptor, closed since
                    pass
            return paths

        with override_settings(LATERITE_QUEUE_MODE="worker"):
            jobs.record.push("parent")
            assert len(threads.running()) == 1
            deadline = time.monotonic() + 30
            while not Record.objects.filter(value="parent").exists():  # ran in the parent
                assert time.monotonic() < deadline, "the parent's job never ran"
                time.sleep(0.05)
            connections.close_all()  # as a pre-forking server does before it forks
            parent_done, child_may_go = os.pipe()
            pid = os.fork()
            if pid == 0:
                code = 1
                try:
                    assert threads.running() == []
                    # The parent threads' SQLite connections are closed here: left open,
                    # they share SQLite's per-process lock records with the child's own
                    # and its commits can be lost.
                    name = os.path.realpath(str(connections["default"].settings_dict["NAME"]))
                    assert [path for path in open_files() if path.startswith(name)] == []
                    os.read(parent_done, 1)  # the parent's thread no longer takes jobs
                    jobs.record.push("child")
                    deadline = time.monotonic() + 30
                    while not Record.objects.filter(value="child").exists():
                        assert time.monotonic() < deadline, "the child's job never ran"
                        time.sleep(0.05)
                    threads.stop_all()
                    code = 0
                except BaseException:
                    traceback.print_exc()
                finally:
                    os._exit(code)
            threads.stop_all()
            os.write(child_may_go, b"x")
            _, status = os.waitpid(pid, 0)
            assert os.waitstatus_to_exitcode(status) == 0
            print(pid)
    """)
    env = workers.env(LATERITE_TEST_WORKERS="1")
    result = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env,
                            capture_output=True, text=True, timeout=90)
    assert result.returncode == 0, result.stderr
    child = int(result.stdout.split()[-1])
    assert [(v, pid == child) for v, _, pid in kinds("record")] == [
        ("parent", False), ("child", True)]


# -- shutdown: the grace, then jobs back uncounted ------------------------------------------


def test_a_job_still_running_after_the_grace_goes_back_uncounted(worker_mode, tmp_path):
    path = tmp_path / "hold"
    path.touch()
    jobs.hold.push("python", str(path), 0.05)  # back in the interpreter every 0.05 s
    wait_for(lambda: kinds("hold-start"))
    threads.stop_all(grace=0.2)
    assert threads.running() == []
    assert kinds("hold-end") == []
    assert counts(worker_mode) == (1, 0)  # back on its queue, due now
    assert returned_attempts(worker_mode) == 1  # claimed again: its first attempt


def test_the_job_of_a_thread_stuck_in_c_is_returned_for_it(worker_mode, tmp_path):
    path = tmp_path / "hold"
    path.touch()
    jobs.hold.push("c", str(path), 3)  # one 3 s sleep in C: no exception reaches it
    wait_for(lambda: kinds("hold-start"))
    stuck = threads.running()
    threads.stop_all(grace=0.2)
    assert counts(worker_mode) == (1, 0)
    # Back from C, the old thread stops at its next bytecode; the job, already returned,
    # is neither settled nor returned twice.
    for thread in stuck:
        thread.join(30)
        assert not thread.is_alive()
    assert kinds("hold-end") == []
    assert counts(worker_mode) == (1, 0)
    assert returned_attempts(worker_mode) == 1


class Crash(BaseException):
    """Raised in a worker thread from outside: any exception out of Worker.run()."""


def test_an_exception_raised_into_a_worker_thread_does_not_end_it(worker_mode, caplog):
    jobs.record.push("before")
    wait_for(lambda: kinds("record"))
    victim = next(t for t in threads.running() if t.name == "laterite-worker-0")
    ctypes.pythonapi.PyThreadState_SetAsyncExc(
        ctypes.c_ulong(victim.ident), ctypes.py_object(Crash)
    )
    wait_for(lambda: "Worker error" in caplog.text)
    assert victim.is_alive()
    jobs.record.push("after")
    wait_for(lambda: len(kinds("record")) == 2)


def test_a_worker_thread_that_dies_is_restarted(worker_mode, caplog, monkeypatch):
    from laterite_django.worker.loop import Worker

    original = Worker.run
    crashed: list[str] = []

    def run_crashing_once(self: Worker) -> int:
        if not crashed:
            crashed.append(self.name)
            raise Crash("out of Worker.run()")
        return original(self)

    monkeypatch.setattr(Worker, "run", run_crashing_once)
    jobs.record.push("before")
    wait_for(lambda: kinds("record"))
    wait_for(lambda: "Worker thread laterite-worker-" in caplog.text)
    assert "stopped (Crash: out of Worker.run()); starting a new one" in caplog.text
    wait_for(lambda: len(threads.running()) == 2)
    jobs.record.push("after")
    wait_for(lambda: len(kinds("record")) == 2)


def test_a_served_request_starts_the_threads_the_test_client_does_not(worker_mode, client):
    assert client.get("/ping/").status_code == 200
    assert threads.running() == []  # the test runner serves nothing
    environ: dict = {}
    setup_testing_defaults(environ)
    environ["PATH_INFO"] = "/ping/"
    answer: list = []

    def serve() -> None:  # as a threaded server does
        answer.extend(WSGIHandler()(environ, lambda status, headers: None))

    server = threading.Thread(target=serve)
    server.start()
    server.join(30)
    assert answer == [str(os.getpid()).encode()]
    assert sorted(t.name for t in threads.running()) == ["laterite-worker-0", "laterite-worker-1"]


@pytest.mark.parametrize("value", [-1, "5", None, float("nan"), True])
def test_a_bad_shutdown_grace_is_refused(value):
    with override_settings(LATERITE_QUEUE_SHUTDOWN_GRACE=value):
        errors = [e for e in check_settings() if e.id == "laterite.E015"]
        assert [e.msg for e in errors] == [
            f"LATERITE_QUEUE_SHUTDOWN_GRACE is {value!r}; it must be seconds >= 0."]
        with pytest.raises(LateriteConfigurationError, match=re.escape(errors[0].msg)):
            threads.ensure_started()
    assert threads.running() == []


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_stop_signal_to_a_process_without_a_server_returns_the_jobs(workers, sig, tmp_path):
    # No server handler to chain to: SIGTERM's default action would end the process
    # at once, Ctrl-C raises KeyboardInterrupt and the process exits.
    path = tmp_path / "hold"
    path.touch()
    jobs.hold.push("python", str(path), 0.05)
    script = textwrap.dedent("""
        import sys, time, django
        django.setup()
        from laterite_django.worker import serving
        serving.start_serving()  # as a server's main thread does
        print("serving", flush=True)
        while True:
            time.sleep(1)
    """)
    env = workers.env(LATERITE_TEST_MODE="worker", LATERITE_TEST_SHUTDOWN_GRACE="0.5")
    proc = subprocess.Popen([sys.executable, "-c", script], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    workers.procs.append(proc)
    assert proc.stdout.readline() == "serving\n"
    wait_for(lambda: kinds("hold-start"))
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode in (-sig, 1), err  # killed by its signal, or KeyboardInterrupt
    assert "shutdown grace: stopping it now" in err
    assert counts(get_store()) == (1, 0)
    assert kinds("hold-end") == []


def test_the_threads_of_a_process_are_listed_as_one_worker(worker_mode):
    jobs.record.push("listed")
    wait_for(lambda: kinds("record"))
    [entry] = wait_for(lambda: [w for w in worker_mode.workers() if w.pid == os.getpid()])
    assert entry.concurrency == 2  # LATERITE_QUEUE_WORKERS threads
    threads.stop_all()
    # Taken off the list once its last thread stops.
    assert [w for w in worker_mode.workers() if w.pid == os.getpid()] == []
