"""Limits enforced inside the claim, through real worker processes racing for jobs:
a per-key concurrency, a queue's concurrency and a queue's rate, each measured from
the jobs' own start and end records (issue 12), on every store."""

from __future__ import annotations

import json
from collections import defaultdict
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.test import override_settings
from django.utils import timezone

from laterite_django import payload
from laterite_django.models import FailedJob
from laterite_django.stores import NewJob
from tests.conftest import Stderr, wait_for
from tests.testapp.models import Record

pytestmark = pytest.mark.django_db(transaction=True)

FLOW = {"LATERITE_TEST_FLOW": "1"}


def keyed_jobs(count: int, keys: int, seconds: float) -> list[NewJob]:
    """`tests.flow_keyed` jobs (registered in the workers only) over `keys` keys, each
    carrying its key and limit as a push of the job would."""
    now = timezone.now()
    return [
        NewJob(name="tests.flow_keyed", queue="default",
               payload=payload.encode("tests.flow_keyed", [f"k{i % keys}", i, seconds], {}),
               available_at=now, pushed_at=now, concurrency_key=f"k{i % keys}",
               concurrency_limit=1)
        for i in range(count)
    ]


def rated_jobs(count: int, seconds: float) -> list[NewJob]:
    """`tests.flow_stamp` jobs of the `low` queue (registered in every worker), each
    recording its start and end under "low"."""
    now = timezone.now()
    return [
        NewJob(name="tests.flow_stamp", queue="low",
               payload=payload.encode("tests.flow_stamp", ["low", seconds], {}),
               available_at=now, pushed_at=now)
        for _ in range(count)
    ]


def most_running(records) -> dict[str, int]:
    """Per value (key or queue): the most jobs running at one moment, from the start
    and end records (an end and a start at the same moment: the end first)."""
    events = defaultdict(list)
    for kind, value, at in records:
        events[value].append((at, 0 if kind == "flow-end" else 1))
    most = {}
    for value, marks in events.items():
        running = peak = 0
        for _, start in sorted(marks):
            running += 1 if start else -1
            peak = max(peak, running)
        most[value] = peak
    return most


def run_workers(workers, commands: int, processes: int, queue: str, env: dict) -> list:
    procs = [workers.start("--queue", queue, "--processes", str(processes), env=env)
             for _ in range(commands)]
    return [(p, Stderr(p)) for p in procs]


def stop(procs) -> None:
    for proc, errors in procs:
        proc.terminate()
        proc.wait(30)
        assert "Traceback" not in errors.text()


def records():
    return Record.objects.filter(kind__in=["flow-start", "flow-end"]).values_list(
        "kind", "value", "at")


def test_a_per_key_limit_of_one_holds_across_worker_processes(store, workers):
    store.push(keyed_jobs(150, keys=10, seconds=0.02))
    procs = run_workers(workers, 2, 3, "default", FLOW)
    wait_for(lambda: Record.objects.filter(kind="flow-end").count() == 150, timeout=180)
    stop(procs)
    peaks = most_running(records())
    assert sorted(peaks) == [f"k{i}" for i in range(10)]
    assert set(peaks.values()) == {1}
    assert not FailedJob.objects.exists()
    assert all(c.total == 0 for c in store.counts().values())


def test_a_key_at_its_limit_does_not_hold_up_other_keys(store, workers):
    # 40 slow jobs of one key first in line, then 10 quick ones of other keys.
    store.push(keyed_jobs(40, keys=1, seconds=0.2))
    store.push([job for job in keyed_jobs(20, keys=20, seconds=0.0)[1:11]])
    procs = run_workers(workers, 1, 2, "default", FLOW)
    others = Record.objects.filter(kind="flow-end").exclude(value="k0")
    wait_for(lambda: others.count() == 10, timeout=60)
    # The quick jobs all ran while the key at its limit still had jobs waiting.
    assert Record.objects.filter(kind="flow-end", value="k0").count() < 40
    wait_for(lambda: Record.objects.filter(kind="flow-end").count() == 50, timeout=60)
    stop(procs)
    assert most_running(records())["k0"] == 1


# With FLOW the workers register jobs with a concurrency limit, and on PostgreSQL make
# the keyed claim; without, the queue-only one (postgres.queue_limited_claim).
CLAIMS = pytest.mark.parametrize("flow", [FLOW, {}], ids=["keyed-claim", "queue-only-claim"])


@CLAIMS
def test_a_queue_concurrency_of_three_holds_across_worker_processes(store, workers, flow):
    store.push(rated_jobs(60, seconds=0.05))
    env = {**flow, "LATERITE_TEST_LIMITS": json.dumps({"low": {"concurrency": 3}})}
    procs = run_workers(workers, 2, 3, "low", env)
    wait_for(lambda: Record.objects.filter(kind="flow-end").count() == 60, timeout=120)
    stop(procs)
    assert most_running(records()) == {"low": 3}
    assert not FailedJob.objects.exists()


@CLAIMS
def test_a_queue_rate_of_twenty_a_second_holds_across_worker_processes(store, workers, flow):
    store.push(rated_jobs(70, seconds=0.0))
    env = {**flow, "LATERITE_TEST_LIMITS": json.dumps({"low": {"rate": "20/s"}})}
    procs = run_workers(workers, 2, 2, "low", env)
    # A job held back by the rate is claimable again a second later, which wakes no
    # idle worker: they look again every LATERITE_QUEUE_POLL while a limit applies.
    # The 70 jobs take about 4 s; a worker that slept out its idle wait (30 s) between
    # two windows took 90 s and more.
    wait_for(lambda: Record.objects.filter(kind="flow-end").count() == 70, timeout=45)
    stop(procs)
    starts = sorted(Record.objects.filter(kind="flow-start").values_list("at", flat=True))
    # The claim counts claims over any second; a job starts a moment after its claim
    # (later when the machine is loaded: a window of 0.8 s once held 21 starts), so
    # its start is measured over windows shorter than the period. A limit not held
    # across processes lets each claim its 20 at once: any window sees 40.
    window = timedelta(seconds=0.6)
    most = max(sum(1 for other in starts if at <= other < at + window) for at in starts)
    assert most <= 20
    assert not FailedJob.objects.exists()


def mixed_jobs(queue: str, count: int) -> list[NewJob]:
    """`tests.flow_mixed` jobs of `queue`: one in three without a key, the others over
    keys k0 to k3 shared by both queues (k0, k2: at most 1 at once; k1, k3: 2)."""
    now = timezone.now()
    jobs = []
    for i in range(count):
        key = None if i % 3 == 0 else f"k{i % 4}"
        jobs.append(NewJob(
            name="tests.flow_mixed", queue=queue,
            payload=payload.encode("tests.flow_mixed", [queue, key, 0.01], {}),
            available_at=now, pushed_at=now, concurrency_key=key,
            concurrency_limit=None if key is None else 1 + i % 4 % 2))
    return jobs


def test_queue_and_key_limits_hold_with_claims_racing_over_several_queues(store, workers):
    # Workers take the two queues in either order, so their claims lock the queues and
    # keys of both at once; jobs of one key are in both queues.
    store.push(mixed_jobs("default", 60) + mixed_jobs("low", 60))
    env = {**FLOW, "LATERITE_TEST_LIMITS": json.dumps(
        {"default": {"concurrency": 3}, "low": {"concurrency": 2}})}
    procs = [
        (proc, Stderr(proc)) for proc in (
            workers.start("--queue", first, "--queue", second, "--processes", "2", env=env)
            for first, second in [("default", "low"), ("low", "default"), ("low", "default")])
    ]
    ends = Record.objects.filter(kind="flow-end", value__startswith="queue:")
    wait_for(lambda: ends.count() == 120, timeout=180)
    stop(procs)
    peaks = most_running(records())
    limits = {"queue:default": 3, "queue:low": 2, "key:k0": 1, "key:k1": 2, "key:k2": 1,
              "key:k3": 2}
    assert sorted(peaks) == sorted(limits)
    assert all(peaks[value] <= limits[value] for value in peaks), peaks
    assert not FailedJob.objects.exists()
    assert all(c.total == 0 for c in store.counts().values())


def test_bad_limits_fail_the_check_naming_the_value():
    with override_settings(LATERITE_QUEUE_LIMITS={"mail": {"rate": "100/x"}}), pytest.raises(
            SystemCheckError) as e:
        call_command("check")
    assert "laterite.E030" in str(e.value) and "'100/x'" in str(e.value)
    with override_settings(LATERITE_QUEUE_LIMITS={"mail": {"concurrency": 0}}), pytest.raises(
            SystemCheckError) as e:
        call_command("check")
    assert "concurrency of 'mail' (0)" in str(e.value)


def test_a_job_with_concurrency_carries_its_key_from_the_push():
    from laterite_django import job
    from laterite_django.registry import registry

    @job("tests.flow_defined", concurrency=2, concurrency_key=lambda tenant: f"t:{tenant}")
    def defined(tenant: int) -> None: ...

    @job("tests.flow_by_name", concurrency=1)
    def by_name() -> None: ...

    try:
        (new,) = defined.new_jobs([((7,), {})])
        assert (new.concurrency_key, new.concurrency_limit) == ("t:7", 2)
        (new,) = by_name.new_jobs([((), {})])
        assert (new.concurrency_key, new.concurrency_limit) == ("tests.flow_by_name", 1)
    finally:
        registry.unregister("tests.flow_defined")
        registry.unregister("tests.flow_by_name")
    with pytest.raises(ValueError, match="concurrency must be an integer >= 1"):
        job("tests.flow_bad", concurrency=0)(lambda: None)
