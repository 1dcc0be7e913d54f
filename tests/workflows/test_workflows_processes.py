"""Chains and batches under real worker processes SIGKILLed mid-run: no link skipped
or doubled, each batch callback pushed exactly once (every store)."""

from __future__ import annotations

import signal
import time
from collections import Counter

import pytest

from laterite_django import batch, chain, resume_queue
from laterite_django.models import Batch, FailedJob
from tests.conftest import Stderr, short_or_full, wait_for
from tests.testapp.jobs import callback, member, step, step_then_pause
from tests.testapp.models import Record
from tests.worker.test_processes import kill_tree

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

ENV = {"LATERITE_TEST_RETRY_AFTER": "2", "LATERITE_TEST_LOG_LEVEL": "ERROR"}


def callbacks() -> Counter:
    """How many times each callback was pushed: its distinct job ids. A callback may
    run twice when its worker is SIGKILLed after it ran and before it was settled (it
    runs while the workers are being killed): that is one push, and its runs have
    distinct attempts."""
    pushed: Counter = Counter()
    runs: dict[str, list[int]] = {}
    for value, attempt in Record.objects.filter(kind="callback").values_list("value", "attempt"):
        runs.setdefault(value, []).append(attempt)
    for value, attempts in runs.items():
        assert not value.endswith("#None"), value
        assert len(set(attempts)) == len(attempts), f"{value} ran twice in one attempt"
        pushed[value.partition("#")[0]] += 1
    return pushed


def run_batch_under_kills(store, workers, total: int, kills: int) -> Batch:
    """Push a batch of `total` members, drain it on 4 processes SIGKILLed whole and
    restarted `kills` times mid-run; return its row once its `finally_` ran."""
    b = batch([member.call(i) for i in range(total)], then=callback.call("then"),
              catch=callback.call("catch"), finally_=callback.call("finally")).push()
    proc = workers.start("--processes", "4", env=ENV)
    stderr = Stderr(proc)
    try:
        for k in range(kills):
            # Kill at a point spread over the run: after (k+1)/(kills+1) of the members.
            goal = total * (k + 1) // (kills + 1)
            wait_for(lambda goal=goal: Record.objects.filter(kind="member").count() >= goal,
                     timeout=120)
            kill_tree(proc)
            proc = workers.start("--processes", "4", env=ENV)
            stderr = Stderr(proc)
        wait_for(lambda: callbacks()["finally"] >= 1, timeout=180)
        time.sleep(1)  # anything pushed twice would have run by now
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0, stderr.text()
    finally:
        kill_tree(proc)
    b.refresh_from_db()
    return b


def test_a_batch_under_whole_group_kills_fires_then_and_finally_once(store, workers):
    total = int(short_or_full(300, 1000))
    b = run_batch_under_kills(store, workers, total, kills=5)
    ran = set(Record.objects.filter(kind="member").values_list("value", flat=True))
    assert ran == {str(i) for i in range(total)}
    assert (b.pending, b.failed, b.state) == (0, 0, "finished"), failed_rows()
    assert callbacks() == Counter({"then": 1, "finally": 1})


def failed_rows() -> list[tuple[str, str, int, str]]:
    """The failed list, as (name, payload, attempts, the error's last line): what an
    assertion on a batch's failures shows when it does not hold."""
    return [(name, payload, attempts, error.strip().splitlines()[-1] if error.strip() else "")
            for name, payload, attempts, error in FailedJob.objects.order_by("id").values_list(
                "name", "payload", "attempts", "error")]


def test_a_failure_under_kills_fires_catch_once_and_never_then(store, workers):
    total = int(short_or_full(300, 1000))
    Record.objects.create(kind="gate", value="7")
    b = run_batch_under_kills(store, workers, total, kills=5)
    assert (b.pending, b.failed, b.state) == (0, 1, "failed"), failed_rows()
    assert callbacks() == Counter({"catch": 1, "finally": 1})
    assert FailedJob.objects.get().name == "tests.member"


def test_a_chain_killed_between_every_pair_of_links_runs_each_once_in_order(store, workers):
    """Each link pauses its queue as it ends, so the next one is pushed and waits
    unclaimed; the worker is SIGKILLed there, the queue resumed, a new worker started."""
    names = ["a", "b", "c", "d", "e"]
    chain(*(step_then_pause.call(n) for n in names)).push()
    for k, _ in enumerate(names):
        proc = workers.start("--queue", "low", "--processes", "1", env=ENV)
        try:
            wait_for(lambda k=k: Record.objects.filter(kind="step").count() >= k + 1, timeout=60)
            if k + 1 < len(names):
                # The next link is pushed (by the step that deleted this one), unclaimed.
                wait_for(lambda: (c := store.counts().get("low")) and c.waiting == 1
                         and c.running == 0, timeout=30)
            else:
                wait_for(lambda: "low" not in store.counts(), timeout=30)
        finally:
            kill_tree(proc)
        resume_queue("low")
    steps = list(Record.objects.filter(kind="step").order_by("id").values_list("value", flat=True))
    assert steps == names
    assert "low" not in store.counts()


def test_chains_under_random_kills_skip_no_link_and_keep_their_order(store, workers):
    """50 chains of 5 quick links, the worker group SIGKILLed every 0.4 s: every link of
    every chain runs, each after the link before it (a link runs twice at most when
    its worker died after running it, before settling it)."""
    chains = int(short_or_full(30, 100))
    for c in range(chains):
        chain(*(step.call(f"{c}:{n}") for n in range(5))).push()
    proc = workers.start("--processes", "2", env=ENV)
    try:
        for _ in range(int(short_or_full(6, 15))):
            time.sleep(0.4)
            kill_tree(proc)
            proc = workers.start("--processes", "2", env=ENV)
        wait_for(lambda: len(set(Record.objects.filter(kind="step").values_list(
            "value", flat=True))) == chains * 5, timeout=120)
    finally:
        kill_tree(proc)
    first: dict[str, int] = {}
    for pk, value in Record.objects.filter(kind="step").order_by("id").values_list("id", "value"):
        first.setdefault(value, pk)
    for c in range(chains):
        order = [first[f"{c}:{n}"] for n in range(5)]
        assert order == sorted(order), f"chain {c} ran out of order"


def test_a_failed_link_retried_by_command_resumes_the_chain(store, workers):
    Record.objects.create(kind="gate", value="c")
    chain(*(step.call(n) for n in "abcde")).push()
    workers.run("--stop-when-empty", env=ENV)
    row = FailedJob.objects.get()
    Record.objects.filter(kind="gate").delete()
    result = workers.command("queue_retry", str(row.pk), env=ENV)
    assert result.returncode == 0, result.stderr
    workers.run("--stop-when-empty", env=ENV)
    steps = list(Record.objects.filter(kind="step").order_by("id").values_list("value", flat=True))
    assert steps == list("abcde")
