"""An idle worker starts a pushed job at once, not after LATERITE_QUEUE_POLL, on every
store: PostgreSQL's LISTEN/NOTIFY, Redis's blocking pop, SQLite's data_version."""

from __future__ import annotations

from datetime import timedelta

import pytest

from tests.conftest import Stderr, wait_for
from tests.testapp import jobs
from tests.testapp.models import Record

# Far longer than the test waits: only a wake-up can start the second job in time.
LONG_POLL = "600"


def ran(value: str) -> bool:
    return Record.objects.filter(kind="record", value=value).exists()


@pytest.mark.parametrize("args", [[], ["--processes", "2"]], ids=["one", "processes"])
def test_an_idle_worker_wakes_for_a_push(workers, store, store_kind, args):
    proc = workers.start(*args, env={"LATERITE_TEST_POLL": LONG_POLL})
    stderr = Stderr(proc)
    jobs.record.push("first")
    wait_for(lambda: ran("first"))  # the worker has claimed, run it, and is idle now

    jobs.record.push("second")

    wait_for(lambda: ran("second") or proc.poll() is not None)
    assert ran("second"), stderr.text()


def test_an_idle_worker_is_not_woken_into_a_job_that_is_not_due(workers, store):
    proc = workers.start(env={"LATERITE_TEST_POLL": LONG_POLL})
    stderr = Stderr(proc)
    jobs.record.push("first")
    wait_for(lambda: ran("first"))

    jobs.record.push_in(timedelta(hours=1), "later")  # a commit, but nothing due
    jobs.record.push("now")

    wait_for(lambda: ran("now") or proc.poll() is not None)
    assert ran("now") and not ran("later"), stderr.text()
