"""An idle worker on Redis, once quiet, sends its server nothing while nothing is pushed
(but its entry in the live workers' list, once per RETRY_AFTER / 3),
stops at once when told, and sweeps again as soon as a job is claimed anywhere.

Counted on a private `redis-server` (the shared one serves other clients too)."""

from __future__ import annotations

import os
import signal
import time
from collections import Counter
from collections.abc import Iterator
from datetime import timedelta

import pytest

from laterite_django.stores import get_store
from tests.conftest import Stderr, redis_store_only, wait_for
from tests.stores.redis.test_round_trips import commands
from tests.testapp import jobs
from tests.testapp.models import Record
from tests.worker.test_redis_worker import QUICK, own_redis

__all__ = ["own_redis"]

PREFIX = f"laterite-test-idle-redis-{os.getpid()}"
# The commands of one beat of a worker's entry in the live workers' list (worker_beat.lua).
WORKER_BEAT = ("evalsha", "time", "hset", "expire", "zadd", "zremrangebyscore")


@pytest.fixture
def store_kind() -> Iterator[str]:
    with redis_store_only(PREFIX) as kind:
        yield kind


def ran(value: str) -> bool:
    return Record.objects.filter(value=value).exists()


def idle_worker(own_redis, workers, processes: int = 1, *args: str):
    """A private Redis server and a worker on it (retry_after 3 s) that ran one job;
    return the server's client, the worker process and its stderr."""
    server = own_redis()
    proc = workers.start("--processes", str(processes), *args,
                         env={"LATERITE_REDIS_URL": server.url, **QUICK})
    stderr = Stderr(proc)
    jobs.record.push("first")
    wait_for(lambda: ran("first"))
    return server.client(), proc, stderr


def test_a_quiet_worker_sends_redis_nothing_and_its_delayed_job_still_runs(own_redis, workers):
    """With retry_after 3 s a worker would sweep every second and claim behind a pop
    every 0.3 s; quiet, it blocks in one pop, longer than redis-py's own socket
    timeout (5 s), until its delayed job is due, which then runs."""
    admin, proc, stderr = idle_worker(own_redis, workers)
    # Pushed once the worker runs (it may take seconds to start on a busy machine), so
    # its time falls well after the window below.
    jobs.record.push_in(timedelta(seconds=12), "later")
    time.sleep(2.5)  # woken, a sweep interval (1 s) idle, the look: quiet
    commands(admin)  # counted from here
    time.sleep(6)
    # Nothing but its entry in the live workers' list, written once per RETRY_AFTER / 3
    # (1 s here) by one script: without it, the worker would be listed as lost.
    seen = commands(admin)
    beats = seen["evalsha"]
    assert beats <= 7
    assert seen == Counter(dict.fromkeys(WORKER_BEAT, beats))
    assert not ran("later")
    wait_for(lambda: ran("later"), timeout=15)
    proc.send_signal(signal.SIGTERM)
    proc.wait(30)
    assert proc.returncode == 0
    stderr._thread.join(10)
    assert "unavailable" not in stderr.text()


def test_a_quiet_worker_wakes_for_a_push_and_stops_at_once(own_redis, workers):
    admin, proc, stderr = idle_worker(own_redis, workers)
    time.sleep(2.5)
    commands(admin)
    jobs.record.push("woken")
    wait_for(lambda: ran("woken"))
    time.sleep(2.5)  # quiet again
    started = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    proc.wait(30)
    # Its pop ends when it pushes to its own list (it would block 300 s otherwise).
    assert time.monotonic() - started < 10
    assert proc.returncode == 0, stderr.text()
    assert not admin.keys(f"{PREFIX}:queue:*:claimed")


def test_a_claim_on_another_queue_wakes_quiet_workers_to_sweep(own_redis, workers):
    """Two quiet workers of queue default; a job of queue mail claimed by a worker that
    never beats (it died) comes back after retry_after, not after the quiet spell's
    5 minutes: the claim woke the quiet workers, which sweep while it is held."""
    _, proc, stderr = idle_worker(own_redis, workers, 2, "--queue", "default")
    time.sleep(2.5)  # both quiet
    jobs.record.enqueue(["abandoned"], {}, queue="mail")
    store = get_store()
    assert len(store.claim(["mail"], "a worker that died")) == 1
    wait_for(lambda: store.counts()["mail"].waiting == 1, timeout=20)
    proc.send_signal(signal.SIGTERM)
    proc.wait(30)
    assert proc.returncode == 0, stderr.text()
