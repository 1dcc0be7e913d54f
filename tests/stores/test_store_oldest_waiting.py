"""Store.oldest_waiting: per queue, when its longest-waiting due job became due, on
every store (the metrics' `laterite_queue_oldest_waiting_seconds`)."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from tests.testapp import jobs


def test_oldest_waiting_names_each_queues_longest_due_job(store):
    assert store.oldest_waiting() == {}
    now = timezone.now()
    an_hour_ago = now - timedelta(hours=1)
    jobs.record.enqueue(("newer",), {}, at=now - timedelta(minutes=1))
    jobs.record.enqueue(("oldest, low priority",), {}, at=an_hour_ago, priority=-3)
    jobs.record.enqueue(("urgent",), {}, at=now - timedelta(minutes=5), priority=9)
    jobs.record.push_at(now + timedelta(minutes=5), "not due yet")
    jobs.mail.push("mail")

    oldest = store.oldest_waiting()
    assert set(oldest) == {"default", "mail"}
    assert abs(oldest["default"] - an_hour_ago) < timedelta(milliseconds=1)
    assert now <= oldest["mail"] <= timezone.now()


def test_a_claimed_or_delayed_job_is_not_waiting(store):
    now = timezone.now()
    jobs.record.enqueue(("first",), {}, at=now - timedelta(minutes=10))
    jobs.record.enqueue(("second",), {}, at=now - timedelta(minutes=2))
    jobs.record.push_in(timedelta(minutes=3), "delayed")
    [claim] = store.claim(["default"], "w")
    assert claim.payload == '{"args":["first"],"kwargs":{}}'
    oldest = store.oldest_waiting()
    assert abs(oldest["default"] - (now - timedelta(minutes=2))) < timedelta(milliseconds=1)
    store.claim(["default"], "w")
    assert store.oldest_waiting() == {}
