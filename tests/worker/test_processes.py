"""Worker processes under a supervisor: real forks, real signals, real kills.

Each test starts `queue_work --processes N` as a subprocess against the test
database and store, and checks what the jobs recorded and where they ended.
The per-job rules through a single worker are in test_worker_rules.py.
"""

from __future__ import annotations

import signal
import subprocess
import time

import psutil
import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

import laterite_django
from laterite_django.core.cancel import Outcome
from laterite_django.core.cancel import reason as cancel_reason
from laterite_django.flow.cancel import GRACE
from laterite_django.models import FailedJob
from laterite_django.worker.supervisor import KILL_MARGIN
from tests.conftest import wait_for
from tests.testapp import jobs
from tests.testapp.models import Record

__all__ = ["kill_tree", "worker_pids"]

INFO = {"LATERITE_TEST_LOG_LEVEL": "INFO"}


def kinds(kind: str) -> list[tuple[str, int, int]]:
    """The records of `kind` in order: (value, attempt, pid)."""
    return list(
        Record.objects.filter(kind=kind).order_by("id").values_list("value", "attempt", "pid")
    )


def worker_pids(proc: subprocess.Popen) -> set[int]:
    """The live worker processes of a supervisor."""
    try:
        return {
            child.pid for child in psutil.Process(proc.pid).children()
            if child.status() != psutil.STATUS_ZOMBIE
        }
    except psutil.NoSuchProcess:
        return set()


def workers_if(proc: subprocess.Popen, count: int) -> set[int] | None:
    """The supervisor's worker pids if there are `count` of them, else None."""
    pids = worker_pids(proc)
    return pids if len(pids) == count else None


def kill_tree(proc: subprocess.Popen) -> None:
    """SIGKILL a supervisor's workers, then the supervisor (no settling, no returns)."""
    if proc.poll() is not None:
        return
    try:
        parent = psutil.Process(proc.pid)
        parent.suspend()
        for child in parent.children(recursive=True):
            child.kill()
    except psutil.NoSuchProcess:
        pass
    proc.kill()
    proc.wait(10)


@pytest.fixture
def supervised(workers):
    """The `workers` pool; every supervisor and its workers are killed at the end."""
    yield workers
    for proc in workers.procs:
        kill_tree(proc)


def finish(proc: subprocess.Popen, timeout: float = 30) -> str:
    """Wait for `proc` to exit 0; return its stderr."""
    try:
        _, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_tree(proc)
        _, err = proc.communicate()
        pytest.fail(f"queue_work did not stop within {timeout} s:\n{err}")
    assert proc.returncode == 0, err
    return err


def waiting(store) -> int:
    """Jobs still on the default queue: due, delayed or claimed."""
    counts = store.counts().get("default")
    return 0 if counts is None else counts.total


def returned_attempts(store) -> int:
    """Claim the one job left on the default queue; return the tries it was charged
    (this inspection's claim included)."""
    claims = store.claim(["default"], "test-inspector")
    assert len(claims) == 1, "the job is not back on its queue"
    return claims[0].tries_used


# -- dying workers --------------------------------------------------------------------


def test_sigkilled_worker_is_replaced_and_its_job_runs_again(store, supervised):
    jobs.patient.push(1.0, "victim")  # tries=3, backoff 0
    proc = supervised.start("--processes", "2", env=INFO)
    wait_for(lambda: kinds("patient-start"))
    (_, _, victim), = kinds("patient-start")
    before = wait_for(lambda: workers_if(proc, 2))
    assert victim in before
    psutil.Process(victim).kill()

    # The supervisor counts the attempt as lost and the job runs again, elsewhere.
    wait_for(lambda: kinds("patient-end"))
    starts = kinds("patient-start")
    assert [(v, a) for v, a, _ in starts] == [("victim", 1), ("victim", 2)]
    assert starts[1][2] != victim
    assert kinds("patient-end") == [("victim", 2, starts[1][2])]
    after = wait_for(lambda: workers_if(proc, 2))
    assert victim not in after  # replaced: two workers again, the dead one not among them
    wait_for(lambda: waiting(store) == 0)
    proc.send_signal(signal.SIGTERM)
    err = finish(proc)
    assert f"Worker process {victim} was killed by SIGKILL; starting another" in err
    assert f"worker lost: its process {victim} was killed by SIGKILL while running it" in err


def test_workers_of_a_killed_supervisor_return_their_jobs_and_exit(store, supervised):
    jobs.patient.push(30, "orphaned")
    proc = supervised.start("--processes", "2")
    wait_for(lambda: kinds("patient-start"))
    children = worker_pids(proc)
    assert len(children) == 2
    proc.kill()
    proc.wait(10)
    # Nobody is left to enforce their timeouts: they stop now and give the job back.
    wait_for(lambda: not any(psutil.pid_exists(pid) and psutil.Process(pid).status()
                             != psutil.STATUS_ZOMBIE for pid in children), timeout=20)
    assert kinds("patient-end") == []
    assert returned_attempts(store) == 1  # given back, not charged a try


# -- timeouts ---------------------------------------------------------------------------


def test_python_timeouts_end_in_the_worker_without_a_kill(store, supervised):
    jobs.slow.push(30)  # time.sleep, timeout 0.5
    jobs.spin.push()  # while True, timeout 0.5
    proc = supervised.start("--processes", "2", "--stop-when-empty", env=INFO)
    err = finish(proc, timeout=60)
    errors = dict(FailedJob.objects.values_list("name", "error"))
    assert errors["tests.slow"].startswith("JobTimeout: timed out after 0.5 s\n")
    assert errors["tests.spin"].startswith("JobTimeout: timed out after 0.5 s\n")
    assert kinds("slow-end") == []
    assert "killing worker process" not in err and "SIGKILL" not in err


def test_job_stuck_in_c_is_killed_by_the_supervisor_and_retried_by_its_rules(
    store, supervised
):
    jobs.stuck_in_c.push(60)  # timeout 0.5, tries 2
    jobs.record.push("others still run")
    proc = supervised.start("--processes", "2", "--stop-when-empty", env=INFO)
    err = finish(proc, timeout=60)
    starts = kinds("stuck-start")
    assert [(v, a) for v, a, _ in starts] == [("60", 1), ("60", 2)]
    first_pid, second_pid = starts[0][2], starts[1][2]
    assert first_pid != second_pid  # the killed worker was replaced
    assert kinds("stuck-end") == []
    assert [a for _, a, _ in kinds("record")] == [1]
    # Attempt 1 was retried (tries=2), attempt 2 failed: the job's own rules.
    assert Record.objects.filter(kind="signal-retrying", value="tests.stuck_in_c|0").count() == 1
    error = FailedJob.objects.get(name="tests.stuck_in_c").error
    assert error == (f"JobTimeout: timed out after 0.5 s; it did not stop, so its worker "
                     f"process {second_pid} was killed")
    for pid in (first_pid, second_pid):
        assert f"killing worker process {pid}" in err
    assert waiting(store) == 0


def test_a_cancelled_job_stuck_in_c_is_killed_by_the_supervisor_after_the_grace(
    store, supervised
):
    job_id = jobs.flow_stuck.push(120).id  # no timeout, 3 tries
    proc = supervised.start("--processes", "2", env=INFO)
    wait_for(lambda: kinds("stuck-start"))
    (_, _, stuck_pid), = kinds("stuck-start")
    assert laterite_django.cancel(job_id) == Outcome.ASKED
    failed = wait_for(lambda: FailedJob.objects.filter(job_id=job_id).first(),
                      timeout=GRACE + KILL_MARGIN + 20)
    assert failed.error == (f"{cancel_reason(True)}; it did not stop, so its worker process "
                            f"{stuck_pid} was killed")
    # Its worker process was replaced; nothing else was lost, and it never ran again.
    wait_for(lambda: (pids := workers_if(proc, 2)) and stuck_pid not in pids)
    jobs.record.push_many([("after 1",), ("after 2",)])
    wait_for(lambda: len(kinds("record")) == 2)
    time.sleep(0.5)
    assert len(kinds("stuck-start")) == 1 and kinds("stuck-end") == []
    proc.send_signal(signal.SIGTERM)
    err = finish(proc)
    assert f"was cancelled and did not stop; killing worker process {stuck_pid}" in err
    assert waiting(store) == 0 and FailedJob.objects.count() == 1


# -- recycling --------------------------------------------------------------------------


def test_max_jobs_recycles_worker_processes(store, supervised):
    jobs.record.push_many([(str(i),) for i in range(8)])
    proc = supervised.start("--processes", "2", "--max-jobs", "2", "--stop-when-empty",
                            env=INFO)
    err = finish(proc, timeout=60)
    runs = kinds("record")
    assert sorted(int(v) for v, _, _ in runs) == list(range(8))
    per_pid: dict[int, int] = {}
    for _, _, pid in runs:
        per_pid[pid] = per_pid.get(pid, 0) + 1
    assert max(per_pid.values()) <= 2 and len(per_pid) >= 4
    assert err.count("recycled (--max-jobs); starting another") >= 3


def test_max_memory_recycles_a_worker_after_its_job(store, supervised):
    jobs.hog.push(400)
    proc = supervised.start("--processes", "2", "--max-memory", "300", env=INFO)
    wait_for(lambda: kinds("hog"))
    (_, _, hog_pid), = kinds("hog")
    wait_for(lambda: not psutil.pid_exists(hog_pid)
             or psutil.Process(hog_pid).status() == psutil.STATUS_ZOMBIE)
    wait_for(lambda: len(worker_pids(proc)) == 2)
    jobs.record.push_many([(str(i),) for i in range(4)])
    wait_for(lambda: len(kinds("record")) == 4)
    assert hog_pid not in {pid for _, _, pid in kinds("record")}
    proc.send_signal(signal.SIGTERM)
    err = finish(proc)
    assert f"Worker process {hog_pid} recycled (--max-memory); starting another" in err
    assert err.count("recycled (--max-memory)") == 1


# -- shutdown ---------------------------------------------------------------------------


@pytest.mark.parametrize("processes", ["1", "2"])
def test_sigterm_finishes_the_jobs_in_hand(store, supervised, processes):
    jobs.patient.push(1.5, "in-hand")
    proc = supervised.start("--processes", processes)
    wait_for(lambda: kinds("patient-start"))
    proc.send_signal(signal.SIGTERM)
    finish(proc)
    assert [(v, a) for v, a, _ in kinds("patient-end")] == [("in-hand", 1)]
    assert waiting(store) == 0


def test_workers_say_their_stop_came_from_the_supervisor(store, supervised):
    """A SIGTERM to the supervisor reaches its workers as its own signal: their log
    names the supervisor, not a bare SIGUSR1 the operator never sent."""
    jobs.patient.push(0.5, "in-hand")
    proc = supervised.start("--processes", "2", env=INFO)
    wait_for(lambda: kinds("patient-start"))
    proc.send_signal(signal.SIGTERM)
    err = finish(proc)
    assert "SIGTERM received: workers finish the jobs in hand" in err
    assert "SIGUSR1 received" not in err
    assert "A stop from the supervisor received: finishing the jobs in hand" in err


def test_second_sigterm_to_the_supervisor_returns_the_jobs(store, supervised):
    jobs.patient.push(30, "first")
    jobs.patient.push(30, "second")
    proc = supervised.start("--processes", "2")
    wait_for(lambda: len(kinds("patient-start")) == 2)
    proc.send_signal(signal.SIGTERM)
    time.sleep(0.3)
    proc.send_signal(signal.SIGTERM)
    finish(proc, timeout=15)
    assert kinds("patient-end") == []
    claims = store.claim(["default"], "test-inspector", limit=2)
    assert sorted(c.tries_used for c in claims) == [1, 1]  # both back, no try charged


@pytest.mark.parametrize("processes", ["1", "2"])
def test_grace_stops_a_long_job_and_returns_it(store, supervised, processes):
    jobs.patient.push(0.2, "quick")
    jobs.patient.push(30, "long")
    proc = supervised.start("--processes", processes, "--grace", "1")
    wait_for(lambda: ("long", 1) in [(v, a) for v, a, _ in kinds("patient-start")])
    proc.send_signal(signal.SIGTERM)
    finish(proc, timeout=20)
    assert [v for v, _, _ in kinds("patient-end")] == ["quick"]
    assert returned_attempts(store) == 1


def test_grace_ends_a_job_stuck_in_c_with_a_kill_and_returns_it(store, supervised):
    jobs.stuck_untimed.push(60)
    proc = supervised.start("--processes", "2", "--grace", "0.5", env=INFO)
    wait_for(lambda: kinds("stuck-start"))
    proc.send_signal(signal.SIGTERM)
    err = finish(proc, timeout=20)
    (_, _, pid), = kinds("stuck-start")
    assert "Returned job tests.stuck_untimed #" in err and f"worker process {pid}" in err
    assert returned_attempts(store) == 1


# -- arguments --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--processes", "0"], "'0' must be 1 or more"),
        (["--processes", "two"], "'two' is not a whole number"),
        (["--max-memory", "-5"], "'-5' must be 1 or more"),
        (["--grace", "soon"], "'soon' is not a number of seconds"),
        (["--once", "--processes", "3"], "--once runs one job: it cannot take --processes 3"),
    ],
)
def test_bad_arguments_name_the_bad_value(args, message):
    with pytest.raises(CommandError, match=message.replace("-", r"\-")):
        call_command("queue_work", *args)
