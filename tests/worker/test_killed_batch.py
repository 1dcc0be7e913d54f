"""A worker group killed while it runs a later job of its batch (real processes).

The sweep that requeues the job cannot tell whether it had started: it is not
charged a try for that claim, but it runs again under a new attempt number, so
no two runs of a job ever see the same `cx.attempt`.
"""

from __future__ import annotations

import pytest

from laterite_django.models import FailedJob, Job
from laterite_django.stores.redis import RedisStore
from tests.conftest import wait_for
from tests.testapp import jobs
from tests.worker.test_processes import kill_tree, kinds, waiting

pytestmark = pytest.mark.django_db(transaction=True)

ENV = {"LATERITE_TEST_RETRY_AFTER": "1", "LATERITE_TEST_LOG_LEVEL": "WARNING"}
HEADS = 30  # quick jobs first: the worker's batches grow (1, 2, 4...) as it drains them


def position(store, job_id: int) -> int:
    """The place of a claimed job in the batch it was claimed with."""
    if isinstance(store, RedisStore):
        return int(store.client.hget(store.key("job", str(job_id)), "position"))
    return Job.objects.get(id=job_id).claim_position


def test_a_job_killed_behind_the_head_of_its_batch_runs_again_under_a_new_attempt(
    store, workers
):
    jobs.record.push_many([(f"head{i}",) for i in range(HEADS)])
    behind = jobs.linger.push("behind").id
    proc = workers.start("--processes", "1", env=ENV)
    try:
        wait_for(lambda: kinds("linger-start"))
        at = position(store, behind)
    finally:
        kill_tree(proc)  # the supervisor too: nobody settles its claims but the sweep
    assert [(v, a) for v, a, _ in kinds("linger-start")] == [("behind", 1)]
    assert at > 0, "claimed at the head of its batch: this test needs it behind"

    # The next worker's sweep requeues it once its claim is older than retry_after.
    proc = workers.start("--processes", "1", env=ENV)
    try:
        wait_for(lambda: len(kinds("linger-start")) == 2 and waiting(store) == 0)
    finally:
        kill_tree(proc)
    # It ran again (tries=1: the lost claim was not charged), as attempt 2, not 1.
    assert [(v, a) for v, a, _ in kinds("linger-start")] == [("behind", 1), ("behind", 2)]
    assert not FailedJob.objects.exists()
