"""A claim as a worker process reports it to its supervisor: every field comes back."""

from __future__ import annotations

import dataclasses
import json
from datetime import timedelta

from django.utils import timezone

from laterite_django.stores import Claim
from laterite_django.worker.reports import claim_from_dict, claim_to_dict


def test_a_claim_crosses_the_pipe_whole():
    now = timezone.now()
    claim = Claim(id=7, name="tests.record", queue="mail", payload='{"args":[1],"kwargs":{}}',
                  attempts=3, pushed_at=now, token="t" * 32, retry_until=now + timedelta(hours=1),
                  unique_key="k", priority=5, last_error="worker lost",
                  available_at=now - timedelta(seconds=1), position=2, uncounted=1,
                  cancel_requested=True)
    # Every field differs from its default, so a field left out would show.
    assert all(getattr(claim, f.name) != f.default for f in dataclasses.fields(Claim)
               if f.default is not dataclasses.MISSING)
    sent = json.loads(json.dumps(claim_to_dict(claim)))
    assert claim_from_dict(sent) == claim
    assert (claim_from_dict(sent).tries_used, claim_from_dict(sent).position) == (2, 2)
