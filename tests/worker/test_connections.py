"""The worker tidies Django's connections around each job, as Django does around a
request (`close_old_connections`): a connection a job, or a receiver of the worker's
signals, leaves out of autocommit is closed before the next job runs (every store)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.db import connection

from laterite_django.signals import job_started, job_succeeded
from laterite_django.worker.loop import Worker
from tests.testapp.jobs import AUTOCOMMIT_SEEN, autocommit_seen

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def seen() -> Iterator[list[bool]]:
    AUTOCOMMIT_SEEN.clear()
    yield AUTOCOMMIT_SEEN
    AUTOCOMMIT_SEEN.clear()
    if not connection.get_autocommit():
        connection.close()


def leave_autocommit_off(**kwargs: object) -> None:
    connection.set_autocommit(False)


def drain() -> int:
    """Run the pushed jobs in one in-process worker that manages its connections (as
    queue_work does), in one batch."""
    worker = Worker(["default"], stop_when_empty=True, batch=100)
    worker._limit = worker.batch
    return worker.run()


def test_a_job_that_leaves_autocommit_off_does_not_pass_it_on(store, seen):
    autocommit_seen.push_many([(True,), (True,), (False,)])
    assert drain() == 3
    assert seen == [True, True, True]


@pytest.mark.parametrize("signal", [job_started, job_succeeded], ids=["started", "succeeded"])
def test_a_receiver_that_leaves_autocommit_off_does_not_pass_it_on(store, seen, signal):
    signal.connect(leave_autocommit_off)
    try:
        autocommit_seen.push_many([(False,)] * 4)
        assert drain() == 4
    finally:
        signal.disconnect(leave_autocommit_off)
    assert seen == [True] * 4
