"""The `worker` mode: worker threads in this process run what it pushes, with the same loop."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading

import pytest
from django.test import override_settings

from laterite_django.models import FailedJob
from laterite_django.worker import threads
from tests.conftest import ROOT, wait_for
from tests.test_processes import kinds, waiting
from tests.testapp import jobs

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
