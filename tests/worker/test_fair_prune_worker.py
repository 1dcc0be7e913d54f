"""Fair turns pruned by real workers, on every store: once a tenant's jobs have all run,
a worker's housekeeping forgets its turn; tenants who come back after it are still
served in turn against another tenant's backlog."""

from __future__ import annotations

import signal

import pytest

from tests.conftest import Stderr, wait_for
from tests.stores.test_fair_waiting import turn_keys
from tests.testapp import jobs
from tests.testapp.models import Record

pytestmark = pytest.mark.slow

TENANTS, JOBS, BIG = 10, 3, 2_000


def fair_started() -> list[str]:
    return list(Record.objects.filter(kind="fair").order_by("id").values_list("value", flat=True))


def test_a_worker_prunes_the_turns_and_tenants_come_back_in_turn(workers, store):
    for tenant in range(TENANTS):
        jobs.fair_record.push_many([(f"t{tenant}", i) for i in range(JOBS)])
    worker = workers.start("--queue", "default")
    errors = Stderr(worker)
    assert wait_for(lambda: len(fair_started()) == TENANTS * JOBS, timeout=60), errors.text()
    worker.send_signal(signal.SIGTERM)
    worker.wait(timeout=30)
    # A worker prunes as it starts its housekeeping, then once a minute.
    worker = workers.start("--queue", "default", "--processes", "2")
    errors = Stderr(worker)
    assert wait_for(lambda: turn_keys(store, "default") == set(), timeout=30), (
        turn_keys(store, "default"), errors.text())

    # Back after the pruning, behind another tenant's backlog: served in turn with it.
    Record.objects.filter(kind="fair").delete()
    jobs.fair_record.push_many([("big", i) for i in range(BIG)])
    assert wait_for(lambda: len(fair_started()) >= 20, timeout=60), errors.text()
    for tenant in range(TENANTS):
        jobs.fair_record.push_many([(f"t{tenant}", i) for i in range(JOBS)])
    # How many of the big tenant's jobs had started once the small tenants had pushed:
    # the workers went on meanwhile, as fast as the machine let them.
    at_push = sum(v.startswith("big:") for v in fair_started())
    assert at_push < BIG // 2, f"the backlog ran out before the small tenants pushed ({at_push})"
    small = TENANTS * JOBS
    order = wait_for(lambda: (values := fair_started()) and sum(
        not v.startswith("big:") for v in values) == small and values, timeout=60)
    assert isinstance(order, list), errors.text()
    big_before_last_small = 0
    big_seen = 0
    for value in order:
        if value.startswith("big:"):
            big_seen += 1
        else:
            big_before_last_small = big_seen
    # Served in turn, each small tenant's 3 jobs take 3 rounds of the 11 keys: the last
    # starts some 50-80 of the big tenant's jobs after the small tenants pushed (the
    # rounds, and the jobs the workers held already), not behind the rest of its
    # backlog (FIFO: more than 1,000 more).
    assert big_before_last_small - at_push < 250, (big_before_last_small, at_push,
                                                   errors.text())
