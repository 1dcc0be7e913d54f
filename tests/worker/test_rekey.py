"""queue_rekey on every store: jobs encrypted under key A; the keys become [B, A] and
the command moves everything to B while 2 workers drain the queue; then, under [B]
alone, every job has run or is readable, and none is lost."""

from __future__ import annotations

import json

from django.test import override_settings

from laterite_django import encryption
from laterite_django.models import FailedJob
from laterite_django.testing import run_jobs
from tests.conftest import Stderr, Workers, wait_for
from tests.settings import TEST_KEY_A, TEST_KEY_B
from tests.testapp.encrypted_jobs import broken, every
from tests.testapp.models import Record

WAITING = 1500
DELAYED = 30
FAILED = 5
ROTATING = {"LATERITE_TEST_ENCRYPTION_KEYS": json.dumps([TEST_KEY_B, TEST_KEY_A])}
NEW_ONLY = {"LATERITE_TEST_ENCRYPTION_KEYS": json.dumps([TEST_KEY_B])}


def test_rekey_while_two_workers_drain_loses_nothing(store, workers: Workers):
    for i in range(FAILED):
        broken.push(f"failed-{i}@example.org", {"n": i})
    run_jobs()
    assert FailedJob.objects.count() == FAILED
    every.push_many([(i, f"user-{i}@example.org") for i in range(WAITING)])
    # Delayed past the drain however slow the machine (made due once rekeyed, below).
    delayed = [every.push_in(3600, i, f"user-{i}@example.org").id
               for i in range(WAITING, WAITING + DELAYED)]

    draining = [workers.start("--stop-when-empty", env=ROTATING) for _ in range(2)]
    stderr = [Stderr(proc) for proc in draining]
    wait_for(lambda: Record.objects.filter(kind="enc-every").count() >= 20)  # draining
    rekey = workers.command("queue_rekey", "--chunk", "10", env=ROTATING, timeout=120)
    assert rekey.returncode == 0, rekey.stderr
    for proc, err in zip(draining, stderr, strict=True):
        assert proc.wait(timeout=120) == 0, err.text()
    said = rekey.stdout.splitlines()[-1]
    assert "under key 'test-b'" in said and f"and {FAILED} failed job(s)" in said, said
    # The delayed jobs waited through it all: re-encrypted, whatever the workers took.
    # and the jobs the workers claimed first were left to them.
    assert DELAYED <= int(said.split()[1]) < WAITING + DELAYED, said

    # Under [B] alone: the delayed jobs run, and the failed ones read.
    assert store.make_due(delayed) == DELAYED
    ran = workers.run("--stop-when-empty", env=NEW_ONLY, timeout=120)
    assert ran.returncode == 0, ran.stderr
    values = sorted(Record.objects.filter(kind="enc-every").values_list("value", flat=True))
    expected = sorted(f"{i}|user-{i}@example.org|" for i in range(WAITING + DELAYED))
    # Each once; if any is missing, what the last worker said and where they are.
    assert values == expected, (sorted(set(expected) - set(values))[:5], store.counts(),
                                ran.stderr[-3000:])
    assert FailedJob.objects.count() == FAILED  # none failed to decrypt
    with override_settings(LATERITE_QUEUE_ENCRYPTION_KEYS=[TEST_KEY_B]):
        readable = sorted(encryption.open_arguments(row.payload)[0][0]
                          for row in FailedJob.objects.all())
    assert readable == sorted(f"failed-{i}@example.org" for i in range(FAILED))


def test_rekey_is_resumable_and_leaves_what_it_cannot_open(store, workers: Workers):
    every.push_many([(i, f"r-{i}@example.org") for i in range(10)])
    with override_settings(LATERITE_QUEUE_ENCRYPTION_KEYS=[TEST_KEY_B]):
        every.push(99, "under-b@example.org")  # a key the command will not list
    ids = sorted(job_id for job_id, _ in store.unclaimed_payloads(0, 100))
    keys = {"LATERITE_TEST_ENCRYPTION_KEYS": json.dumps(
        [{"id": "test-c", "key": "lnAAVDvU2zvRr7biujIa09fM6Z9c/RXx5esX3d/CH/I="}, TEST_KEY_A])}
    first = workers.command("queue_rekey", "--chunk", "4", "--after", str(ids[5]), env=keys)
    assert first.returncode == 0, first.stderr
    assert f"#{ids[-1]} left as it is" in first.stderr and "'test-b'" in first.stderr
    assert "Re-encrypted 4 waiting or delayed" in first.stdout  # ids[6:10]
    assert f"resume with --after {ids[-1]}" in first.stdout
    again = workers.command("queue_rekey", env=keys)
    assert "Re-encrypted 6 waiting or delayed" in again.stdout  # the rest only
    stored = dict(store.unclaimed_payloads(0, 100))
    assert sum('"key":"test-c"' in text for text in stored.values()) == 10


def test_a_chunk_claimed_meanwhile_does_not_end_the_walk(store, store_kind):
    """The rekey walks the waiting jobs a chunk at a time, and stops at an empty one.
    Jobs claimed between the store's listing of the ids and its read of their payloads
    are left out; a chunk of only those must not read as the end."""
    with override_settings(LATERITE_QUEUE_ENCRYPTION_KEYS=[TEST_KEY_A]):
        ids = [every.push(i, f"user-{i}@example.org").id for i in range(3)]
    if store_kind == "database":
        assert len(store.claim(["default"], "w", 2)) == 2  # the first two, claimed
    else:
        # As a claim between the store's two reads leaves them: still listed, claimed.
        for job_id in ids[:2]:
            store.client.hset(store.key("job", str(job_id)), "token", "0" * 32)
    assert [job_id for job_id, _ in store.unclaimed_payloads(0, 2)] == [ids[2]]
