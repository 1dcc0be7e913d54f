"""Prometheus metrics of real workers: `queue_work --metrics-port` scraped over HTTP.

The counters must equal the mix of outcomes pushed, also when worker processes are
recycled (--max-jobs) along the way: each process hands its counts to the
supervisor, which owns them. Runs on every store.
"""

from __future__ import annotations

import signal
import socket
import urllib.error
import urllib.request

import pytest
from django.test import Client

from tests.admin.test_admin import redis_down  # noqa: F401 -- a fixture
from tests.conftest import Stderr, wait_for
from tests.testapp import jobs

pytest.importorskip("prometheus_client")
from prometheus_client.parser import text_string_to_metric_families

INFO = {"LATERITE_TEST_LOG_LEVEL": "INFO"}

# (job, outcome) -> count for the mix pushed by `push_mix`.
MIX = {
    ("tests.noop", "succeeded"): 6,
    ("tests.flaky", "retried"): 3,
    ("tests.flaky", "succeeded"): 3,
    ("tests.fail_now", "failed"): 2,
    ("tests.always_broken", "retried"): 2,
    ("tests.always_broken", "failed"): 2,
}
ATTEMPTS = sum(MIX.values())


def push_mix() -> None:
    jobs.noop.push_many([(i,) for i in range(6)])
    jobs.flaky.push_many([(f"f{i}", 2) for i in range(3)])  # fails once, then succeeds
    jobs.fail_now.push_many([(f"n{i}",) for i in range(2)])  # Fail: no retry
    jobs.always_broken.push_many([(f"b{i}",) for i in range(2)])  # 2 tries, both raise


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def scrape(port: int) -> dict[tuple[str, tuple[tuple[str, str], ...]], float] | None:
    """Every sample of /metrics by (name, sorted labels); None while nothing answers."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
            text = r.read().decode()
    except (urllib.error.URLError, ConnectionError):
        return None
    return samples(text)


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def jobs_total(found: dict) -> dict[tuple[str, str], float]:
    return {
        (dict(labels)["job"], dict(labels)["outcome"]): value
        for (name, labels), value in found.items()
        if name == "laterite_jobs_total" and dict(labels)["queue"] == "default"
    }


def counted(port: int, expected: dict) -> dict | None:
    found = scrape(port)
    return found if found is not None and jobs_total(found) == expected else None


@pytest.mark.slow
def test_counters_of_two_processes_survive_recycling(workers):
    port = free_port()
    push_mix()
    proc = workers.start("--processes", "2", "--max-jobs", "4", "--sleep", "0.1",
                         "--metrics-port", str(port), env=INFO)
    err = Stderr(proc)
    found = wait_for(lambda: counted(port, MIX), timeout=60)
    # The duration histograms count every attempt; the waits, every attempt per queue.
    for job, attempts in (("tests.noop", 6), ("tests.flaky", 6), ("tests.fail_now", 2),
                          ("tests.always_broken", 4)):
        key = ("laterite_job_duration_seconds_count", (("job", job), ("queue", "default")))
        assert found[key] == attempts
    assert found[("laterite_job_wait_seconds_count", (("queue", "default"),))] == ATTEMPTS
    # The queue gauges, read from the store at the scrape.
    assert found[("laterite_queue_jobs", (("queue", "default"), ("state", "failed")))] == 4
    assert found[("laterite_queue_jobs", (("queue", "default"), ("state", "waiting")))] == 0
    assert found[("laterite_queue_oldest_waiting_seconds", (("queue", "default"),))] == 0

    # More jobs after the recycling: the counts go on from where they were.
    jobs.noop.push_many([(i,) for i in range(5)])
    more = {**MIX, ("tests.noop", "succeeded"): 11}
    wait_for(lambda: counted(port, more), timeout=60)
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=30)
    assert "recycled (--max-jobs)" in err.text()


@pytest.mark.slow
def test_one_process_serves_its_own_counts(workers):
    port = free_port()
    push_mix()
    proc = workers.start("--processes", "1", "--sleep", "0.1", "--metrics-port", str(port))
    found = wait_for(lambda: counted(port, MIX), timeout=60)
    assert found[("laterite_queue_jobs", (("queue", "mail"), ("state", "waiting")))] == 0
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=30)


def test_each_settled_word_counts_under_the_outcomes_readme_lists():
    """A cancelled job settles as failed (it is on the failed list): no settled word
    is "cancelled", and laterite_jobs_total has no such outcome."""
    from datetime import UTC, datetime

    from laterite_django.stores import Claim
    from laterite_django.worker.settle import Settled
    from laterite_django.worker.tally import OUTCOMES, Tally

    words = {value for name, value in vars(Settled).items() if name.isupper()}
    assert set(OUTCOMES) <= words
    handed: list[dict] = []
    tally = Tally(handed.append)
    claim = Claim(id=1, name="tests.noop", queue="default", payload="{}", attempts=1,
                  pushed_at=datetime.now(UTC), token="t")
    for word in sorted(words):
        tally.ended(claim, word, 0.01)
    tally.flush()
    assert {outcome for _, _, outcome, _ in handed[0]["jobs"]} == {
        "succeeded", "retried", "failed", "snoozed"}


def test_a_busy_port_is_a_clear_error(workers):
    with socket.socket() as taken:
        taken.bind(("0.0.0.0", 0))
        taken.listen()
        result = workers.run("--processes", "1", "--stop-when-empty",
                             "--metrics-port", str(taken.getsockname()[1]))
    assert result.returncode != 0
    assert "cannot serve metrics" in result.stderr


@pytest.mark.parametrize("store_kind", ["database"], indirect=True)  # the same on every store
def test_metrics_address_chooses_the_address_listened_on(workers):
    psutil = pytest.importorskip("psutil")
    port = free_port()
    proc = workers.start("--processes", "1", "--sleep", "0.1", "--metrics-port", str(port),
                         "--metrics-address", "127.0.0.1", env=INFO)
    err = Stderr(proc)
    wait_for(lambda: scrape(port) or proc.poll() is not None, timeout=30)
    assert proc.poll() is None, err.text()
    listening = {(c.laddr.ip, c.laddr.port)
                 for c in psutil.Process(proc.pid).net_connections(kind="inet")
                 if c.status == psutil.CONN_LISTEN}
    assert listening == {("127.0.0.1", port)}
    # Served from the start: a SIGTERM may come before the worker's handlers are set.
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=30)
    assert f"Serving metrics on 127.0.0.1:{port}" in err.text()


@pytest.mark.parametrize("processes", ["1", "2"])
def test_a_sigterm_as_soon_as_metrics_are_served_stops_cleanly(workers, processes):
    """The metrics are served before the worker's own stop handlers are in place (before
    the store is checked and the schedules read): a SIGTERM in between is taken up by
    them once they are, never the default action that kills the command (-15)."""
    for _ in range(3):
        port = free_port()
        proc = workers.start("--processes", processes, "--sleep", "0.1",
                             "--metrics-port", str(port), env=INFO)
        err = Stderr(proc)
        wait_for(lambda port=port, proc=proc: _listening(port) or proc.poll() is not None,
                 timeout=30, every=0.001)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0, err.text()


def _listening(port: int) -> bool:
    """Whether something accepts connections on 127.0.0.1:`port` (no request sent)."""
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


@pytest.mark.parametrize("store_kind", ["database"], indirect=True)
def test_a_bad_metrics_address_is_a_clear_error(workers):
    result = workers.run("--processes", "1", "--stop-when-empty", "--metrics-port", "0",
                         "--metrics-address", "localhost:9808")
    assert result.returncode != 0
    assert "--metrics-address" in result.stderr
    assert "'localhost:9808'" in result.stderr


@pytest.mark.parametrize("store_kind", ["database"], indirect=True)
def test_metrics_address_needs_metrics_port(workers):
    result = workers.run("--processes", "1", "--stop-when-empty",
                         "--metrics-address", "127.0.0.1")
    assert result.returncode != 0
    assert "--metrics-address 127.0.0.1 needs --metrics-port" in result.stderr


def test_the_view_serves_the_queue_gauges(store):
    jobs.record.push("waiting")
    jobs.fail_now.push("x")
    response = Client().get("/metrics/")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain")
    found = samples(response.content.decode())
    assert found[("laterite_queue_jobs", (("queue", "default"), ("state", "waiting")))] == 2
    assert found[("laterite_queue_oldest_waiting_seconds", (("queue", "default"),))] >= 0
    assert found[("laterite_queue_jobs", (("queue", "mail"), ("state", "waiting")))] == 0
    assert not any(name == "laterite_jobs_total" for name, _ in found)


def paused_gauges(found: dict) -> dict[str, float]:
    return {dict(labels)["queue"]: value for (name, labels), value in found.items()
            if name == "laterite_queue_paused"}


def test_the_view_says_which_queues_are_paused(store):
    store.pause(["mail", "reports"])  # "reports": paused, neither configured nor used
    found = samples(Client().get("/metrics/").content.decode())
    assert paused_gauges(found) == {"default": 0, "mail": 1, "low": 0, "reports": 1}
    store.resume(["mail", "reports"])
    found = samples(Client().get("/metrics/").content.decode())
    assert paused_gauges(found) == {"default": 0, "mail": 0, "low": 0}


def test_the_workers_server_says_which_queues_are_paused(store):
    from laterite_django.metrics.server import MetricsServer
    from laterite_django.metrics.totals import Totals

    store.pause(["low"])
    server = MetricsServer(0, Totals(), address="127.0.0.1")
    try:
        found = scrape(server.port)
    finally:
        server.close()
    assert found is not None
    assert paused_gauges(found) == {"default": 0, "mail": 0, "low": 1}


def test_the_view_says_the_store_is_up(store):
    found = samples(Client().get("/metrics/").content.decode())
    assert found[("laterite_store_up", ())] == 1


@pytest.mark.django_db
def test_the_view_says_the_store_is_down_in_a_gauge(redis_down):  # noqa: F811
    response = Client().get("/metrics/")
    assert response.status_code == 200  # a failed scrape would hide every other series
    found = samples(response.content.decode())
    assert found[("laterite_store_up", ())] == 0
    assert not any(name.startswith("laterite_queue_") for name, _ in found)


@pytest.mark.django_db
def test_the_workers_server_says_the_store_is_down_beside_its_counters(redis_down):  # noqa: F811
    from laterite_django.metrics.server import MetricsServer
    from laterite_django.metrics.totals import Totals

    totals = Totals()
    totals.add({"jobs": [("default", "tests.noop", "succeeded", 3)]})
    server = MetricsServer(0, totals, address="127.0.0.1")
    try:
        found = scrape(server.port)
    finally:
        server.close()
    assert found is not None
    assert found[("laterite_store_up", ())] == 0
    assert jobs_total(found) == {("tests.noop", "succeeded"): 3}


def test_a_worker_waiting_for_its_store_at_start_serves_store_up_0(workers, store_kind):
    from tests.management.test_commands import store_down

    env, _ = store_down(store_kind)
    port = free_port()
    proc = workers.start("--processes", "1", "--metrics-port", str(port), env=env)
    err = Stderr(proc)
    found = wait_for(lambda: scrape(port), timeout=30)
    assert found[("laterite_store_up", ())] == 0
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 0
    assert "waiting for it to come back" in err.text()
