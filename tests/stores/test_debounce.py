"""Debounced pushes on every store: a waiting job holding the key is replaced in place (its
id kept, the last arguments, due S seconds after the last push but not past its first
push plus M); a running job is left alone; concurrent pushers leave one job."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from datetime import timedelta

import pytest
from django.db import transaction
from django.utils import timezone

from laterite_django.core.values import NewJob
from laterite_django.models import FailedJob, OutboxJob
from tests.conftest import ROOT
from tests.testapp import jobs


def debounced(value: str, key: str = "product:1", seconds: float = 30.0,
              longest: float | None = None, queue: str = "default") -> NewJob:
    """A debounced push of tests.record(value), as JobFunction makes it."""
    now = timezone.now()
    return NewJob(
        name="tests.record", queue=queue,
        payload=json.dumps({"args": [value], "kwargs": {}}),
        available_at=now + timedelta(seconds=seconds), pushed_at=now, unique_key=key,
        delay=seconds, debounce=seconds, debounce_max=longest,
    )


def plain(key: str | None = None) -> NewJob:
    now = timezone.now()
    return NewJob(name="tests.record", queue="default", payload='{"args":["plain"],"kwargs":{}}',
                  available_at=now, pushed_at=now, unique_key=key, delay=0.0)


def waiting(store, queue: str = "default") -> int:
    counts = store.counts().get(queue)
    return 0 if counts is None else counts.waiting + counts.delayed


def claim_now(store, job_id: int):
    """Make job `job_id` due and claim it."""
    assert store.make_due([job_id]) == 1
    (claim,) = store.claim(["default"], "w")
    assert claim.id == job_id
    return claim


def test_a_second_push_replaces_the_waiting_job_keeping_its_id(store):
    first, replaced = store.push_debounced(debounced("a"))
    assert not replaced
    second, replaced = store.push_debounced(debounced("b"))
    assert (second, replaced) == (first, True)
    assert waiting(store) == 1
    claim = claim_now(store, first)
    assert json.loads(claim.payload)["args"] == ["b"]
    assert claim.unique_key == "product:1"


def test_each_push_moves_the_due_time_to_s_after_it(store):
    store.push_debounced(debounced("a", seconds=1.0))
    first_due = store.next_due(["default"])
    time.sleep(0.4)
    store.push_debounced(debounced("b", seconds=1.0))
    second_due = store.next_due(["default"])
    assert timedelta(seconds=0.3) < second_due - first_due < timedelta(seconds=0.8)
    assert store.claim(["default"], "w") == []


def test_debounce_max_caps_the_due_time_at_the_first_push_plus_m(store):
    store.push_debounced(debounced("a", seconds=1.0, longest=1.2))
    first_due = store.next_due(["default"])  # first push + 1.0; the cap: first push + 1.2
    time.sleep(0.5)
    store.push_debounced(debounced("b", seconds=1.0, longest=1.2))
    capped = store.next_due(["default"])
    assert timedelta(seconds=0.1) < capped - first_due < timedelta(seconds=0.3)
    # Past the cap, a push makes it due at once (the cap is in the past).
    time.sleep(1.0)
    store.push_debounced(debounced("c", seconds=1.0, longest=1.2))
    (claim,) = store.claim(["default"], "w")
    assert json.loads(claim.payload)["args"] == ["c"]


def test_without_a_max_the_job_waits_as_long_as_pushes_come(store):
    store.push_debounced(debounced("a", seconds=0.3))
    for value in "bcd":
        time.sleep(0.15)
        store.push_debounced(debounced(value, seconds=0.3))
    assert store.claim(["default"], "w") == []
    time.sleep(0.4)
    (claim,) = store.claim(["default"], "w")
    assert json.loads(claim.payload)["args"] == ["d"]


def test_a_running_job_is_not_replaced_a_new_one_waits_behind_it(store):
    first, _ = store.push_debounced(debounced("a"))
    claim = claim_now(store, first)
    second, replaced = store.push_debounced(debounced("b"))
    assert second != first and not replaced
    third, replaced = store.push_debounced(debounced("c"))
    assert (third, replaced) == (second, True)
    assert json.loads(claim.payload)["args"] == ["a"]
    assert waiting(store) == 1


def test_a_released_job_holds_its_key_again_and_is_replaced(store):
    first, _ = store.push_debounced(debounced("a"))
    claim = claim_now(store, first)
    assert store.release(claim, timezone.now() + timedelta(seconds=30), "retry")
    again, replaced = store.push_debounced(debounced("b"))
    assert (again, replaced) == (first, True)
    claim = claim_now(store, first)
    assert json.loads(claim.payload)["args"] == ["b"]
    assert claim.attempts == 2  # replaced in place: its attempts are kept


def test_a_released_job_whose_key_another_job_took_meanwhile_runs_apart(store):
    first, _ = store.push_debounced(debounced("a"))
    claim = claim_now(store, first)
    second, _ = store.push_debounced(debounced("b"))  # waits behind the running one
    assert store.release(claim, timezone.now() + timedelta(seconds=30), "retry")
    third, replaced = store.push_debounced(debounced("c"))
    assert (third, replaced) == (second, True)
    assert waiting(store) == 2


def test_a_job_retried_from_the_failed_list_holds_its_key(store):
    first, _ = store.push_debounced(debounced("a"))
    store.fail(claim_now(store, first), "boom")
    assert FailedJob.objects.count() == 1
    assert store.retry() == 1
    _, replaced = store.push_debounced(debounced("b"))
    assert replaced
    assert waiting(store) == 1


def test_debounce_keys_and_unique_keys_share_one_namespace(store):
    (unique_id,) = store.push([plain(key="product:1")])
    job_id, replaced = store.push_debounced(debounced("a"))
    assert (job_id, replaced) == (unique_id, True)
    # A plain unique push is dropped while the debounced job waits with the key.
    assert store.push([plain(key="product:1")]) == [None]
    assert waiting(store) == 1


def test_the_replacement_takes_the_queue_and_priority_of_the_last_push(store):
    job_id, _ = store.push_debounced(debounced("a", queue="default"))
    later = debounced("b", queue="mail")
    later.priority = 5
    assert store.push_debounced(later) == (job_id, True)
    assert waiting(store, "default") == 0 and waiting(store, "mail") == 1
    store.make_due([job_id])
    (claim,) = store.claim(["mail"], "w")
    assert (claim.id, claim.priority, json.loads(claim.payload)["args"]) == (job_id, 5, ["b"])


def test_other_keys_are_apart(store):
    one, _ = store.push_debounced(debounced("a", key="product:1"))
    two, replaced = store.push_debounced(debounced("b", key="product:2"))
    assert one != two and not replaced
    assert waiting(store) == 2


def test_the_job_api_reports_debounced(store):
    first = jobs.record.push("a", debounce=30, debounce_max=60, debounce_key="product:9")
    second = jobs.record.push("b", debounce=30, debounce_max=60, debounce_key="product:9")
    assert first.queued and not first.debounced
    assert (second.status, second.id, second.debounced) == ("queued", first.id, True)
    claim = claim_now(store, first.id)
    assert json.loads(claim.payload)["args"] == ["b"]


def test_inside_a_transaction_nothing_is_lost_and_one_job_waits(store):
    with transaction.atomic():
        jobs.record.push("a", debounce=30, debounce_key="product:3")
        jobs.record.push("b", debounce=30, debounce_key="product:3")
    assert not OutboxJob.objects.exists()
    assert waiting(store) == 1
    pushed = jobs.record.push("c", debounce=30, debounce_key="product:3")
    assert pushed.debounced
    claim = claim_now(store, int(pushed.id))
    assert json.loads(claim.payload)["args"] == ["c"]


def test_a_rolled_back_transaction_pushes_nothing(store):
    with pytest.raises(RuntimeError), transaction.atomic():
        jobs.record.push("a", debounce=30, debounce_key="product:4")
        raise RuntimeError("rolled back")
    assert waiting(store) == 0
    assert not OutboxJob.objects.exists()


def test_the_redis_outbox_carries_the_debounce(store, store_kind):
    if store_kind != "redis":
        pytest.skip("the outbox is the Redis store's")
    first = jobs.record.push("a", debounce=30, debounce_max=40, debounce_key="product:5")
    with transaction.atomic():
        jobs.record.push("b", debounce=30, debounce_max=40, debounce_key="product:5")
        row = OutboxJob.objects.get()
        assert (row.unique_key, row.debounce, row.debounce_max) == ("product:5", 30.0, 40.0)
    assert not OutboxJob.objects.exists()
    assert waiting(store) == 1
    claim = claim_now(store, int(first.id))
    assert json.loads(claim.payload)["args"] == ["b"]


# The pushers: each pushes its share of debounced jobs for one key as fast as it can,
# then prints the ids and whether each replaced a waiting job.
PUSHER = """
import django, json, sys
django.setup()
from tests.testapp import jobs
results = [jobs.record.push(f"{sys.argv[1]}-{i}", debounce=60, debounce_key="race")
           for i in range(int(sys.argv[2]))]
print(json.dumps([[r.id, r.debounced] for r in results]))
"""


def test_four_processes_racing_on_one_key_leave_exactly_one_job(store, workers):
    procs = [subprocess.Popen([sys.executable, "-c", PUSHER, str(n), "25"], cwd=ROOT,
                              env=workers.env(), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for n in range(4)]
    answers = []
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        answers += json.loads(out)
    assert len(answers) == 100
    assert len({job_id for job_id, _ in answers}) == 1
    assert sum(not replaced for _, replaced in answers) == 1
    assert waiting(store) == 1
