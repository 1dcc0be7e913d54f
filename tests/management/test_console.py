"""What `queue_work` says on the console in a project whose settings log nothing for
laterite: a banner, a line per retry and failure, more with each --verbosity; a store
that is down at start said once, and its return; a Ctrl-C to the whole process group
that never reads as a crash."""

from __future__ import annotations

import logging
import os
import re
import signal
import subprocess
import sys
import time
from urllib.parse import urlsplit

import pytest
from django.conf import settings
from django.db import connection

from laterite_django.management.console import add_console, handled_by_project, version
from tests.conftest import ROOT, Stderr, short_or_full, wait_for
from tests.management.test_commands import store_down
from tests.testapp import jobs

# tests/settings.py then leaves LOGGING out, like a new project's settings.
NO_LOGGING = {"LATERITE_TEST_NO_LOGGING": "1"}


def push_some() -> dict[str, int]:
    """A job that fails for good after a retry, one that asks to retry in 90 s, and one
    that succeeds."""
    return {
        "broken": jobs.always_broken.push("b").id,  # tries=2, backoff=0
        "later": jobs.retry_explicit.push("r", 90).id,  # Retry("not yet", delay=90)
        "ok": jobs.record.push("x").id,
    }


def kind(store_kind: str) -> str:
    """How the banner names the test store (the cluster's is the Redis store)."""
    return "redis" if store_kind == "redis_cluster" else store_kind


def where(store_kind: str) -> str:
    """How the banner names the test store's place."""
    data = connection.settings_dict
    if connection.vendor == "sqlite":
        database = f"database 'default' (SQLite file {data['NAME']})"
    else:
        database = (f"database 'default' (PostgreSQL at {data['HOST']}:{data['PORT']}, "
                    f"name {data['NAME']!r})")
    if store_kind != "database":  # redis, or redis_cluster: its first node
        alias = "redis" if store_kind == "redis" else "redis_cluster"
        location = settings.CACHES[alias]["LOCATION"]  # LATERITE_REDIS_URL, or a list
        url = urlsplit(location if isinstance(location, str) else location[0])
        return (f"cache '{alias}' (Redis at {url.hostname}:{url.port or 6379}, "
                f"db {int(url.path.strip('/') or 0)}), failed list in {database}")
    return database


def so_far(stderr: Stderr) -> str:
    """What the process wrote to stderr until now (Stderr.text() waits for its end)."""
    return "".join(stderr.lines)


def messages(stderr: str) -> list[str]:
    """The log lines' messages, without their time, process and level."""
    return [re.sub(r"^\S+ \S+ \[\d+\] [A-Z]+ ", "", line) for line in stderr.splitlines()]


def test_verbosity_1_says_the_banner_each_retry_and_failure_and_the_stop(workers, store_kind):
    ids = push_some()
    result = workers.run("--stop-when-empty", env=NO_LOGGING)
    assert result.returncode == 0, result.stderr
    assert messages(result.stderr) == [
        f"laterite {version()} queue_work: {kind(store_kind)} store, {where(store_kind)}; "
        "queues default, mail, low; 1 process",
        f"Job tests.always_broken #{ids['broken']} attempt 1 failed: ValueError: broken b; "
        "retrying in 0 s",
        f"Job tests.retry_explicit #{ids['later']} attempt 1 failed: Retry: not yet; "
        "retrying in 1 min 30 s",
        f"Job tests.always_broken #{ids['broken']} failed after 2 attempts: "
        "ValueError: broken b",
        messages(result.stderr)[-1],
    ]
    assert re.fullmatch(r"Worker \S+ stopped after 4 jobs \(empty\)",
                        messages(result.stderr)[-1])
    # Levels: a failure is a warning, the rest information.
    assert " WARNING Job tests.always_broken" in result.stderr
    assert "password" not in result.stderr.lower()


def test_the_banner_says_which_queue_it_serves_is_paused(workers, store, store_kind):
    store.pause(["mail", "elsewhere"])  # `elsewhere`: paused, but not served here
    result = workers.run("--stop-when-empty", env=NO_LOGGING)
    assert result.returncode == 0, result.stderr
    assert messages(result.stderr)[0] == (
        f"laterite {version()} queue_work: {kind(store_kind)} store, {where(store_kind)}; "
        "queues default, mail (paused), low; 1 process")


def test_verbosity_0_is_silent_but_for_errors(workers, store_kind):
    push_some()
    result = workers.run("--stop-when-empty", "--verbosity", "0", env=NO_LOGGING)
    assert result.returncode == 0 and result.stderr == ""


def test_verbosity_2_adds_the_worker_processes(workers, store_kind):
    push_some()
    quiet = workers.run("--stop-when-empty", "--processes", "2", env=NO_LOGGING)
    assert quiet.returncode == 0, quiet.stderr
    assert "worker process" not in quiet.stderr
    assert "2 processes" in quiet.stderr and "failed after 2 attempts" in quiet.stderr
    assert re.search(r"Supervisor \d+ stopped$", quiet.stderr.strip())

    push_some()
    result = workers.run("--stop-when-empty", "--processes", "2", "-v", "2", env=NO_LOGGING)
    assert result.returncode == 0, result.stderr
    lines = messages(result.stderr)
    assert len([line for line in lines if line.startswith("Started worker process ")]) == 2
    assert len([line for line in lines if re.fullmatch(r"Worker process \d+ is done \(empty\)",
                                                       line)]) == 2
    assert "failed after 2 attempts" in result.stderr
    assert " started (attempt " not in result.stderr and " succeeded in " not in result.stderr
    # One process: its worker's start, which -v 1 leaves to the banner.
    push_some()
    single = workers.run("--stop-when-empty", "-v", "2", env=NO_LOGGING)
    assert re.search(r"\] INFO Worker \S+ started on queues default, mail, low\n",
                     single.stderr)
    assert " started (attempt " not in single.stderr


def test_verbosity_3_adds_every_job(workers, store_kind):
    ids = push_some()
    result = workers.run("--stop-when-empty", "-v", "3", env=NO_LOGGING)
    assert result.returncode == 0, result.stderr
    lines = messages(result.stderr)
    assert f"Job tests.record #{ids['ok']} started (attempt 1)" in lines
    assert any(re.fullmatch(rf"Job tests.record #{ids['ok']} succeeded in \d+\.\d{{3}} s", line)
               for line in lines)
    assert f"Job tests.always_broken #{ids['broken']} started (attempt 2)" in lines
    assert "failed after 2 attempts" in result.stderr


def test_a_project_that_logs_laterite_gets_no_second_handler(workers, store_kind):
    # tests/settings.py logs `laterite` at WARNING through a handler of its own.
    ids = push_some()
    result = workers.run("--stop-when-empty", "-v", "3")
    assert result.returncode == 0, result.stderr
    failed = f"Job tests.always_broken #{ids['broken']} failed after 2 attempts"
    assert result.stderr.count(failed) == 1  # once: the project's handler only
    assert "queue_work:" not in result.stderr  # its level (WARNING) holds, not -v 3's


def test_whether_the_project_logs_laterite():
    assert handled_by_project()  # tests/settings.py has a handler on `laterite`
    assert add_console(3) is None  # so queue_work adds none
    manager = logging.Manager(logging.RootLogger(logging.WARNING))
    log = manager.getLogger("laterite")
    assert not handled_by_project(log)  # a new project: nothing, root included
    log.parent.addHandler(logging.NullHandler())
    assert handled_by_project(log)  # the root logger's handler hears it
    log.propagate = False
    assert not handled_by_project(log)  # unless it does not propagate
    log.addHandler(logging.NullHandler())
    assert handled_by_project(log)  # a NullHandler is a choice: silence


def test_below_verbosity_3_no_job_line_is_even_made(monkeypatch):
    """A new project's worker shows no job's start or end below -v 3: it builds none."""
    from laterite_django.management import console

    laterite, jobs_log = logging.getLogger("laterite"), logging.getLogger("laterite.jobs")
    monkeypatch.setattr(laterite, "handlers", [])  # as in a new project
    monkeypatch.setattr(console, "handled_by_project", lambda log=None: False)
    levels = (laterite.level, jobs_log.level)
    for verbosity, shown in ((1, False), (2, False), (3, True)):
        handler = add_console(verbosity, stream=sys.stderr)
        try:
            assert jobs_log.isEnabledFor(logging.INFO) is shown
            assert laterite.isEnabledFor(logging.INFO)  # retries and the rest still show
        finally:
            console.remove_console(handler)
        assert (laterite.level, jobs_log.level) == levels  # as they were


# -- a store that is down at start -----------------------------------------------------


def test_worker_started_while_redis_is_down_says_so_once_then_says_it_is_back(
    workers, store_kind, tmp_path
):
    if store_kind != "redis":
        pytest.skip("a Redis server of its own is started and stopped")
    from tests.worker.test_redis_worker import RedisServer, need_redis_server

    need_redis_server()
    env, address = store_down(store_kind)
    port = int(address.rsplit(":", 1)[1])
    proc = workers.start(env={**NO_LOGGING, **env})
    stderr = Stderr(proc)
    wait_for(lambda: "waiting for it to come back" in so_far(stderr), timeout=30)
    time.sleep(2)  # it looks again several times, silently
    assert proc.poll() is None
    server = RedisServer(tmp_path, persist=False)
    server.port = port
    server.start()
    try:
        wait_for(lambda: "Store available again" in so_far(stderr), timeout=30)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
    finally:
        server.kill()
    lines = messages(stderr.text())
    down = [line for line in lines if "Store unavailable" in line]
    assert len(down) == 1, lines
    assert f"127.0.0.1:{port}" in down[0] and down[0].endswith("waiting for it to come back")
    back = [line for line in lines if line.startswith("Store available again")]
    assert len(back) == 1 and f"Redis at 127.0.0.1:{port}" in back[0], lines
    assert "Traceback" not in stderr.text()


def test_a_store_lost_while_working_is_said_once_then_its_return(workers, store_kind,
                                                                tmp_path):
    if store_kind != "redis":
        pytest.skip("a Redis server of its own is started and stopped")
    from tests.worker.test_redis_worker import RedisServer, need_redis_server

    need_redis_server()
    server = RedisServer(tmp_path, persist=False)
    server.start()
    try:
        proc = workers.start("-v", "2", env={**NO_LOGGING, "LATERITE_REDIS_URL": server.url})
        stderr = Stderr(proc)
        wait_for(lambda: " started on queues " in so_far(stderr), timeout=30)
        server.kill()
        wait_for(lambda: "Store unavailable" in so_far(stderr), timeout=30)
        time.sleep(2.5)  # it retries after 0.5, 1 and 2 s, silently
        server.start()
        wait_for(lambda: "Store available again" in so_far(stderr), timeout=30)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
    finally:
        server.kill()
    lines = messages(stderr.text())
    down = [line for line in lines if "Store unavailable" in line]
    assert len(down) == 1 and f"127.0.0.1:{server.port}" in down[0], lines
    assert len([line for line in lines if line.startswith("Store available again")]) == 1


def test_a_store_down_at_start_is_an_error_even_at_verbosity_0(workers, store_kind):
    env, address = store_down(store_kind)
    result = workers.run("-v", "0", "--max-seconds", "1", env={**NO_LOGGING, **env})
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 2, result.stderr
    assert " ERROR Store unavailable: " in lines[0] and address in lines[0]
    assert lines[0].endswith("; waiting for it to come back") and ".;" not in lines[0]
    assert lines[1].startswith("CommandError: ") and "still unavailable after 1 s" in lines[1]


def test_a_stop_signal_while_waiting_for_the_store_exits_0(workers, store_kind):
    env, _ = store_down(store_kind)
    proc = workers.start("--processes", "2", env={**NO_LOGGING, **env})
    stderr = Stderr(proc)
    wait_for(lambda: "waiting for it to come back" in so_far(stderr), timeout=30)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(30) == 0
    assert messages(stderr.text())[-1] == "Stopped while waiting for the store"
    assert "worker process" not in stderr.text()  # none was started


# -- Ctrl-C to the whole process group -------------------------------------------------


def children_ended(pid: int) -> bool:
    """Whether every worker process of supervisor `pid` has exited (zombies, unreaped)."""
    import psutil

    return all(child.status() == psutil.STATUS_ZOMBIE for child in psutil.Process(pid).children())


def ctrl_c(workers, *, wait: float, paused: bool) -> tuple[int, str]:
    """Start `queue_work --processes 2` in a process group of its own, SIGINT the whole
    group once both workers wait for jobs; return its exit code and stderr. With
    `paused`, the supervisor is stopped (SIGSTOP) meanwhile and resumed only once its
    workers have exited, as on a loaded machine."""
    import psutil

    proc = subprocess.Popen(
        [sys.executable, "-m", "django", "queue_work", "--processes", "2", "-v", "3"],
        cwd=ROOT, env=workers.env(**NO_LOGGING), stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE, text=True, start_new_session=True,
    )
    stderr = Stderr(proc)
    try:
        wait_for(lambda: so_far(stderr).count(" started on queues ") == 2, timeout=60)
        time.sleep(wait)
        if paused:
            os.kill(proc.pid, signal.SIGSTOP)
            wait_for(lambda: psutil.Process(proc.pid).status() == psutil.STATUS_STOPPED)
        os.killpg(proc.pid, signal.SIGINT)
        if paused:
            wait_for(lambda: children_ended(proc.pid), timeout=30)
            os.kill(proc.pid, signal.SIGCONT)
        code = proc.wait(30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
        text = stderr.text()
        proc.stderr.close()
    return code, text


@pytest.mark.slow
def test_ctrl_c_to_the_process_group_while_idle_is_never_a_crash(workers, store_kind):
    """Ctrl-C in a terminal signals the supervisor and its workers at once; a worker
    that stops on it must not be taken for one that died and be replaced. Every third
    round the supervisor hears it only after its workers are gone."""
    if store_kind != "database":
        pytest.skip("the supervisor's signals do not depend on the store")
    for attempt in range(int(short_or_full(6, 15))):
        code, text = ctrl_c(workers, wait=0.1 * (attempt % 4), paused=attempt % 3 == 2)
        assert "starting another" not in text, f"round {attempt}:\n{text}"
        assert code == 0, f"round {attempt}:\n{text}"
        assert re.search(r"Supervisor \d+ stopped\n$", text), f"round {attempt}:\n{text}"
