"""A claim as a worker process reports it to its supervisor: every field comes back."""

from __future__ import annotations

import dataclasses
import json
import os
from datetime import timedelta

from django.utils import timezone

from laterite_django.stores import Claim
from laterite_django.worker.processes import Child
from laterite_django.worker.reports import (
    PipeReporter,
    ReportReader,
    claim_from_dict,
    claim_to_dict,
)


def test_a_claim_crosses_the_pipe_whole():
    now = timezone.now()
    claim = Claim(id=7, name="tests.record", queue="mail", payload='{"args":[1],"kwargs":{}}',
                  attempts=3, pushed_at=now, token="t" * 32, retry_until=now + timedelta(hours=1),
                  unique_key="k", priority=5, last_error="worker lost",
                  available_at=now - timedelta(seconds=1), position=2, uncounted=1,
                  cancel_requested=True, started=1_700_000_000.25, ended=1_700_000_002.5)
    # Every field differs from its default, so a field left out would show.
    assert all(getattr(claim, f.name) != f.default for f in dataclasses.fields(Claim)
               if f.default is not dataclasses.MISSING)
    sent = json.loads(json.dumps(claim_to_dict(claim)))
    assert claim_from_dict(sent) == claim
    assert (claim_from_dict(sent).tries_used, claim_from_dict(sent).position) == (2, 2)


def test_the_supervisor_knows_when_a_child_s_jobs_started_and_ended():
    """A claim crosses the pipe when claimed, before it starts; its start and its end,
    stamped by the child, follow with the start and success reports, so that a job the
    supervisor settles (its worker died or was killed) has its history record's times."""
    now = timezone.now()
    claims = [Claim(id=i, name="tests.record", queue="mail", payload="{}", attempts=1,
                    pushed_at=now, token=f"t{i}") for i in (1, 2)]
    read, write = os.pipe()
    try:
        reporter = PipeReporter(write)
        reporter.hold(claims)
        claims[0].started, claims[0].ended = 1_700_000_000.5, 1_700_000_001.25
        reporter.start(claims[0], None)
        reporter.succeeded(claims[0])
        claims[1].started = 1_700_000_002.75
        reporter.start(claims[1], 30.0)
        child = Child(pid=1, fd=read, slot=0, started=0.0)
        for message in ReportReader().feed(os.read(read, 65536)):
            child.hear(message)
    finally:
        os.close(read)
        os.close(write)
    assert (child.finished[1].started, child.finished[1].ended) == (1_700_000_000.5,
                                                                    1_700_000_001.25)
    assert child.running is child.claims[2]
    assert (child.running.started, child.running.ended) == (1_700_000_002.75, 0.0)
