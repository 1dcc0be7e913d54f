"""Store.next_due: when the next unclaimed job of some queues is due, on every store."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from tests.testapp import jobs


def test_next_due_names_the_earliest_unclaimed_job(store):
    assert store.next_due(["default"]) is None
    in_a_minute = timezone.now() + timedelta(minutes=1)
    jobs.record.push_at(in_a_minute + timedelta(minutes=1), "later")
    jobs.record.push_at(in_a_minute, "sooner")
    jobs.mail.push("other queue, due now")
    assert abs(store.next_due(["default"]) - in_a_minute) < timedelta(milliseconds=1)
    assert store.next_due(["default", "mail"]) <= timezone.now()
    assert store.next_due([]) is None

    jobs.record.push("due now")
    assert store.next_due(["default"]) <= timezone.now()
    store.claim(["default"], "w")  # a claimed job is not waiting
    assert abs(store.next_due(["default"]) - in_a_minute) < timedelta(milliseconds=1)
