"""`queue_work --stop-when-empty --wait-delayed SECONDS`: drain retries too, on every store."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.management import CommandError, call_command

from tests.testapp import jobs
from tests.testapp.models import Record


def attempts(kind: str) -> list[int]:
    return sorted(Record.objects.filter(kind=kind).values_list("attempt", flat=True))


def test_retries_with_backoff_run_to_their_end(workers, store):
    jobs.backoff_flaky.push("w", 3)  # fails twice, each retry due 1 s later
    later = jobs.record.push_in(timedelta(hours=1), "later")

    done = workers.run("--stop-when-empty", "--wait-delayed", "5")

    assert done.returncode == 0, done.stderr
    assert attempts("backoff-attempt") == [1, 2, 3]
    assert attempts("backoff-ok") == [3]
    # A job due beyond the bound is left waiting; the command did not wait for it.
    assert not Record.objects.filter(kind="record").exists()
    counts = store.counts()["default"]
    assert (counts.waiting, counts.delayed, counts.running, counts.failed) == (0, 1, 0, 0)
    assert later.queued


def test_without_it_the_retry_is_left_delayed(workers, store):
    jobs.backoff_flaky.push("w", 2)

    done = workers.run("--stop-when-empty")

    assert done.returncode == 0, done.stderr
    assert attempts("backoff-attempt") == [1]
    # Left for later: still delayed, or just due if the machine was slow (1 s backoff).
    counts = store.counts()["default"]
    assert (counts.delayed + counts.waiting, counts.running, counts.failed) == (1, 0, 0)


def test_with_several_processes(workers, store):
    jobs.backoff_flaky.push_many([("a", 2), ("b", 2)])

    done = workers.run("--stop-when-empty", "--wait-delayed", "5", "--processes", "2")

    assert done.returncode == 0, done.stderr
    assert sorted(Record.objects.filter(kind="backoff-ok").values_list("value", flat=True)) == [
        "a", "b"]
    assert store.counts() == {}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--wait-delayed", "5"], "--wait-delayed 5 needs --stop-when-empty"),
        (["--stop-when-empty", "--wait-delayed", "-1"], "-1"),
        (["--stop-when-empty", "--wait-delayed", "soon"], "soon"),
    ],
)
def test_bad_use_is_refused(db, args, message):
    with pytest.raises(CommandError, match=message):
        call_command("queue_work", *args)

