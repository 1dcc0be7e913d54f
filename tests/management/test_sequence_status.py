"""Held sequences where an operator looks: `queue_status` (text and --json) lists the
sequences a failed head holds; `queue_forget` of that head lets the rest go on."""

from __future__ import annotations

import json
from io import StringIO

from django.core.management import call_command

from laterite_django.models import FailedJob
from tests.testapp import jobs


def run(*args: str) -> str:
    out = StringIO()
    call_command(*args, stdout=out, stderr=StringIO())
    return out.getvalue()


def test_queue_status_lists_held_sequences_and_queue_forget_releases_one(store):
    for n in range(4):
        jobs.seq_step.push("acct:7", n)
    jobs.seq_step.push("acct:8", 0)
    (first, other) = sorted(store.claim(["low"], "test", 10), key=lambda c: c.id)
    store.fail(first, "gave up")
    failed = FailedJob.objects.get()
    text = run("queue_status")
    assert "held sequences (a failed head holds the rest; queue_forget it, or retry it): 1" in text
    assert f"  acct:7  failed job {failed.pk} (low), 3 waiting behind it" in text.splitlines()
    data = json.loads(run("queue_status", "--json"))
    assert data["low"]["held_sequences"] == [
        {"key": "acct:7", "failed_job_id": failed.pk, "job_id": first.id, "waiting": 3}]
    assert data["default"]["held_sequences"] == []
    run("queue_forget", str(failed.pk), "--no-input")
    assert "held sequences" not in run("queue_status")
    assert json.loads(run("queue_status", "--json"))["low"]["held_sequences"] == []
    store.delete([other])
    assert [c.id for c in store.claim(["low"], "test", 10)] == [first.id + 1]
