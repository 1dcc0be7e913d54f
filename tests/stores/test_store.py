"""The store-behaviour suite: every store passes the same tests."""

from __future__ import annotations

import threading
import time
from datetime import timedelta

import pytest
from django.db import connections, transaction
from django.utils import timezone

from laterite_django.models import FailedJob
from laterite_django.stores import NewJob, get_store
from tests.testapp import jobs


def new(name="tests.record", queue="default", *, at=None, key=None, priority=0, payload=None):
    now = timezone.now()
    return NewJob(
        name=name,
        queue=queue,
        payload=payload or '{"args":["x"],"kwargs":{}}',
        available_at=at or now,
        pushed_at=now,
        unique_key=key,
        priority=priority,
    )


def test_push_returns_ids_and_counts(store):
    ids = store.push([new(), new(), new(queue="mail")])
    assert len(set(ids)) == 3 and all(isinstance(i, int) for i in ids)
    counts = store.counts()
    assert (counts["default"].pending, counts["mail"].pending) == (2, 1)
    assert counts["default"].delayed == counts["default"].reserved == 0


def set_ids_back(store, taken: int) -> None:
    """Make the store's next id `taken`, an id already taken, as a database restored
    without its sequence's value, or rows inserted with explicit ids, leave it."""
    from django.db import connection

    if store.__class__.__name__ == "RedisStore":
        store.client.set(store.key("id"), taken - 1)
        return
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SELECT setval(pg_get_serial_sequence('laterite_job', 'id'), %s, "
                           "false)", [taken])
        else:
            cursor.execute("UPDATE sqlite_sequence SET seq = %s WHERE name = 'laterite_job'",
                           [taken - 1])


@pytest.mark.parametrize("keyed", [False, True])
@pytest.mark.parametrize("count", [1, 3])
def test_a_push_given_a_taken_id_never_drops_or_overwrites_a_job(store, count, keyed):
    # Jobs whose keys no waiting job has are not duplicates: the push either raises or
    # stores them under ids of their own, and every job already there stays as it was.
    from django.db import IntegrityError

    first = store.push([new(payload='{"args":["first"],"kwargs":{}}')])
    set_ids_back(store, first[0])
    try:
        ids = store.push([new(key=f"k{i}" if keyed else None) for i in range(count)])
    except IntegrityError as e:
        assert "laterite_job_pkey" in str(e)
        ids = []
    else:
        assert None not in ids and first[0] not in ids and len(set(ids)) == count
    claims = store.claim(["default"], "w", 10)
    assert sorted(c.id for c in claims) == sorted(first + ids)
    assert [c.payload for c in claims if c.id == first[0]] == ['{"args":["first"],"kwargs":{}}']


def test_claim_takes_oldest_first_and_counts_the_attempt(store):
    first, second = store.push([new(), new()])
    claims = store.claim(["default"], "w1")
    assert [c.id for c in claims] == [first]
    claim = claims[0]
    assert claim.attempts == 1 and claim.token and claim.name == "tests.record"
    assert claim.payload == '{"args":["x"],"kwargs":{}}'
    assert store.counts()["default"].reserved == 1
    assert [c.id for c in store.claim(["default"], "w2")] == [second]
    assert store.claim(["default"], "w3") == []


def test_every_value_comes_back_as_it_was_pushed(store):
    # Quotes, backslashes, escapes, accents, a character outside the BMP, U+2028 and
    # an empty string survive the store's own encoding of a push (Redis: JSON).
    payload = '{"args":["\\"q\\" \\\\ \\n \\u0000 é 😀 \u2028",""],"kwargs":{"k":"v"}}'
    later = timezone.now() + timedelta(seconds=0.2)
    ids = store.push([
        new("tests.récord", "qué", key="clé 😀", priority=-3, payload=payload),
        new(at=later, key=None),
    ])
    assert all(ids)
    (claim,) = store.claim(["qué"], "w")
    assert (claim.name, claim.queue, claim.payload) == ("tests.récord", "qué", payload)
    assert (claim.unique_key, claim.priority, claim.id) == ("clé 😀", -3, ids[0])
    assert store.claim(["default"], "w") == []  # the other is not due yet
    time.sleep(0.3)
    assert [c.id for c in store.claim(["default"], "w")] == [ids[1]]


def test_claim_follows_queue_order_then_priority(store):
    low = store.push([new(queue="low")])[0]
    plain = store.push([new(queue="mail")])[0]
    urgent = store.push([new(queue="mail", priority=10)])[0]
    default = store.push([new(queue="default")])[0]
    order = [store.claim(["default", "mail", "low"], "w")[0].id for _ in range(4)]
    assert order == [default, urgent, plain, low]


def test_one_claim_of_several_queues_takes_them_in_order_then_priority_then_age(store):
    low = store.push([new(queue="low"), new(queue="low")])
    plain = store.push([new(queue="mail")])[0]
    urgent = store.push([new(queue="mail", priority=10)])[0]
    default = store.push([new(queue="default"), new(queue="default")])
    claims = store.claim(["default", "mail", "low"], "w", limit=5)
    assert [c.id for c in claims] == [*default, urgent, plain, low[0]]
    assert [c.position for c in claims] == [0, 1, 2, 3, 4]
    assert [c.id for c in store.claim(["default", "mail", "low"], "w", limit=5)] == [low[1]]


def test_a_queue_listed_twice_is_claimed_from_once(store):
    ids = store.push([new(queue="mail"), new(queue="default"), new(queue="mail")])
    claims = store.claim(["mail", "default", "mail"], "w", limit=5)
    assert [c.id for c in claims] == [ids[0], ids[2], ids[1]]
    assert [c.position for c in claims] == [0, 1, 2]


def test_claim_many_at_once(store):
    ids = store.push([new() for _ in range(5)])
    claims = store.claim(["default"], "w", limit=3)
    assert [c.id for c in claims] == ids[:3]
    assert len({c.token for c in claims}) >= 1
    assert [c.id for c in store.claim(["default"], "w", limit=10)] == ids[3:]


def test_delayed_job_is_not_claimed_until_due(store):
    store.push([new(at=timezone.now() + timedelta(hours=1))])
    assert store.claim(["default"], "w") == []
    assert store.counts()["default"].delayed == 1
    store.push([new(at=timezone.now() - timedelta(seconds=1))])
    assert len(store.claim(["default"], "w")) == 1


def test_delete_needs_the_current_token(store):
    store.push([new()])
    claim = store.claim(["default"], "w")[0]
    stolen = type(claim)(**{**_fields(claim), "token": "not-the-token"})
    assert store.delete([stolen]) == 0
    assert store.delete([claim]) == 1
    assert store.delete([claim]) == 0
    assert store.counts().get("default") is None or store.counts()["default"].total == 0


def test_delete_pairs_each_job_with_its_own_token(store):
    store.push([new(), new(), new()])
    first = store.claim(["default"], "w")[0]
    second, third = store.claim(["default"], "w", 2)
    swapped = [type(c)(**{**_fields(c), "token": t})
               for c, t in ((first, second.token), (second, first.token))]
    assert store.delete(swapped) == 0
    assert store.delete([third, second, first]) == 3
    assert store.counts().get("default") is None or store.counts()["default"].total == 0


def test_release_puts_back_with_delay_and_keeps_attempts(store):
    store.push([new()])
    claim = store.claim(["default"], "w")[0]
    assert store.release(claim, timezone.now() + timedelta(hours=1), "boom")
    assert store.counts()["default"].delayed == 1
    assert not store.release(claim, timezone.now(), "again")  # the token is spent
    assert store.claim(["default"], "w") == []


def test_release_due_now_is_claimed_again_with_next_attempt(store):
    store.push([new()])
    claim = store.claim(["default"], "w")[0]
    assert store.release(claim, timezone.now(), "boom")
    again = store.claim(["default"], "w")[0]
    assert again.id == claim.id and again.attempts == 2 and again.last_error == "boom"
    assert again.token != claim.token


def test_release_uncharged(store):
    store.push([new()])
    claim = store.claim(["default"], "w")[0]
    assert store.release(claim, timezone.now(), uncharged=True)
    again = store.claim(["default"], "w")[0]
    # A new attempt number (the job may have started), but one try charged, not two.
    assert (again.attempts, again.uncounted, again.tries_used) == (2, 1, 1)
    assert store.release(again, timezone.now(), "boom")
    last = store.claim(["default"], "w")[0]
    assert (last.attempts, last.uncounted, last.tries_used) == (3, 1, 2)


def test_release_unstarted(store):
    store.push([new()])
    claim = store.claim(["default"], "w")[0]
    assert store.release(claim, timezone.now(), uncharged=True, started=False)
    # It never ran under that claim: its attempt is taken back, the number used again.
    again = store.claim(["default"], "w")[0]
    assert (again.attempts, again.uncounted, again.tries_used) == (1, 0, 1)


def test_fail_moves_to_failed_list(store):
    job_id = store.push([new(queue="mail", key="k1")])[0]
    claim = store.claim(["mail"], "w")[0]
    failed_id = store.fail(claim, "Fail: nope\n\ntraceback here")
    row = FailedJob.objects.get(pk=failed_id)
    assert (row.job_id, row.name, row.queue, row.attempts, row.unique_key) == (
        job_id, "tests.record", "mail", 1, "k1")
    assert row.error_summary == "Fail: nope"
    assert store.fail(claim, "twice") is None
    assert FailedJob.objects.count() == 1
    assert store.counts()["mail"].failed == 1
    assert store.counts()["mail"].total == 0


def test_retry_puts_failed_jobs_back_with_attempts_afresh(store):
    store.push([new(), new(queue="mail")])
    for queue in ("default", "mail"):
        store.fail(store.claim([queue], "w")[0], "boom")
    first, second = FailedJob.objects.order_by("id").values_list("id", flat=True)
    assert store.retry([first]) == 1
    assert list(FailedJob.objects.values_list("id", flat=True)) == [second]
    claim = store.claim(["default"], "w")[0]
    assert claim.attempts == 1
    assert store.retry() == 1
    assert FailedJob.objects.count() == 0
    assert store.claim(["mail"], "w")[0].attempts == 1


def test_forget_deletes_failed_jobs(store):
    store.push([new(), new()])
    for _ in range(2):
        store.fail(store.claim(["default"], "w")[0], "boom")
    first = FailedJob.objects.order_by("id").first().pk
    assert store.forget([first]) == 1
    assert store.forget() == 1
    assert FailedJob.objects.count() == 0


def test_heartbeat_and_requeue_abandoned(store):
    store.push([new(), new()])
    alive = store.claim(["default"], "w")[0]
    dead = store.claim(["default"], "w")[0]
    # A heartbeat within the last second keeps a claim; a silent one is requeued.
    import time

    time.sleep(1.1)
    assert store.heartbeat([alive]) == 1
    assert store.requeue_abandoned(1, "worker lost") == 1
    again = store.claim(["default"], "w2")[0]
    assert again.id == dead.id and again.attempts == 2 and again.last_error == "worker lost"
    assert not store.release(dead, timezone.now())  # the dead worker's token is void
    assert store.delete([alive]) == 1


def test_one_sweep_requeues_every_abandoned_job_however_many(store):
    # More than one statement's worth on PostgreSQL (sql_postgres.SWEEP_BATCH).
    total = 2500
    store.push([new() for _ in range(total)])
    while store.claim(["default"], "w", 100):
        pass
    assert store.counts()["default"].running == total
    assert store.requeue_abandoned(-1, "lost") == total
    assert store.counts()["default"].running == 0
    assert store.counts()["default"].pending == total


def test_unique_key_drops_a_push_while_the_key_waits(store):
    first = store.push([new(key="user:1")])[0]
    assert store.push([new(key="user:1")]) == [None]
    two, dropped, plain = store.push([new(key="user:2"), new(key="user:2"), new()])
    assert dropped is None and first < two < plain
    claim = store.claim(["default"], "w")[0]
    assert claim.id == first
    # Running does not count as waiting: a new push with the key is stored.
    assert store.push([new(key="user:1")])[0] is not None
    # Releasing the running one for retry does not crash on the key.
    assert store.release(claim, timezone.now(), "retry")
    assert store.counts()["default"].pending == 4


def test_push_many_keeps_order_with_duplicates(store):
    ids = store.push([new(key="a"), new(), new(key="a"), new(key="b"), new()])
    assert ids[2] is None
    kept = [i for i in ids if i is not None]
    assert kept == sorted(kept) and len(kept) == 4


def test_requeue_abandoned_does_not_crash_on_unique_key(store):
    store.push([new(key="k")])
    claim = store.claim(["default"], "w")[0]
    assert store.push([new(key="k")])[0] is not None
    assert store.requeue_abandoned(-1, "lost") == 1
    assert store.counts()["default"].pending == 2
    assert claim


def test_clear_one_queue_or_all(store):
    store.push([new(), new(queue="mail"), new(queue="mail")])
    assert store.clear("mail") == 2
    assert store.counts()["default"].total == 1
    assert store.clear() == 1
    assert all(c.total == 0 for c in store.counts().values())


def test_ping(store):
    store.ping()


def test_concurrent_pushes_of_one_key_store_one_job(store):
    results: list = []
    barrier = threading.Barrier(8)

    def push() -> None:
        try:
            barrier.wait()
            results.append(jobs.unique.push(42).status)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=push) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results) == ["duplicate"] * 7 + ["queued"]
    assert store.counts()["default"].pending == 1


def test_concurrent_claims_never_share_a_job(store):
    store.push([new() for _ in range(200)])
    claimed: list[int] = []
    lock = threading.Lock()

    def claim_all() -> None:
        mine = get_store()
        try:
            while batch := mine.claim(["default"], threading.current_thread().name, limit=3):
                with lock:
                    claimed.extend(c.id for c in batch)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=claim_all) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(claimed) == 200 == len(set(claimed))


def test_push_in_atomic_commits_with_the_caller(store):
    with transaction.atomic():
        jobs.record.push("kept")
    assert store.counts()["default"].pending == 1
    with pytest.raises(RuntimeError), transaction.atomic():
        jobs.record.push("dropped")
        raise RuntimeError("rollback")
    assert store.counts()["default"].pending == 1
    assert store.claim(["default"], "w")[0].payload == '{"args":["kept"],"kwargs":{}}'


def _fields(claim):
    return {name: getattr(claim, name) for name in claim.__dataclass_fields__}


def test_settle_and_claim_deletes_finished_and_claims_next(store):
    first, second, third = store.push([new(), new(), new()])
    done = store.claim(["default"], "w", limit=2)
    nxt = store.settle_and_claim(done, ["default"], "w", limit=2)
    assert [c.id for c in nxt] == [third]
    assert store.counts()["default"].total == 1
    assert store.settle_and_claim(nxt, ["default"], "w") == []
    assert store.counts().get("default") is None or store.counts()["default"].total == 0
    assert {c.id for c in done} == {first, second}


def test_wait_wakes_on_a_push_or_times_out(store):
    stop = threading.Event()
    set_up(store, stop)
    started = time.monotonic()
    store.wait(["default"], 0.2, stop)
    assert time.monotonic() - started >= 0.15  # nothing pushed: it waited
    waiting, woke = threading.Event(), threading.Event()
    waited: list[float] = []

    def waiter() -> None:
        try:
            set_up(get_store(), stop)
            waiting.set()
            started = time.monotonic()
            get_store().wait(["default"], 30, stop)
            waited.append(time.monotonic() - started)
            woke.set()
        finally:
            get_store().close()
            connections.close_all()

    thread = threading.Thread(target=waiter)
    thread.start()
    assert waiting.wait(15)
    time.sleep(0.3)  # let it wait
    jobs.record.push("wake up")
    assert woke.wait(15), "a push did not wake the waiting worker"
    thread.join()
    assert 0.2 <= waited[0] < 15  # it waited, and the push woke it, not its timeout


def set_up(store, stop: threading.Event) -> None:
    """Make the waits that set up what wakes a worker, as its first idle rounds do:
    on PostgreSQL the first LISTENs and the second takes the idle workers' lock, and
    each returns at once, so the claim that follows sees a push made before it."""
    for _ in range(2):
        store.wait(["default"], 0.2, stop)
