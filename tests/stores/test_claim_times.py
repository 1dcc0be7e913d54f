"""A claim hands back the times its job was pushed with, exactly and time-zone aware,
on every store (PostgreSQL's claim reads them with psycopg's own loader, not Django's:
stores/database/postgres.py)."""

from __future__ import annotations

from datetime import UTC, timedelta

import pytest
from django.utils import timezone

from tests.testapp.jobs import windowed

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_claim_reads_back_the_times_of_its_push(store):
    when = (timezone.now() - timedelta(seconds=5)).replace(microsecond=123456)
    before = timezone.now()
    windowed.push_at(when, "x")
    after = timezone.now()
    [claim] = store.claim(["default"], "w", limit=1)
    assert claim.available_at == when
    assert before <= claim.pushed_at <= after
    # windowed's retry window: 3 s from its push.
    assert claim.retry_until == claim.pushed_at + timedelta(seconds=3)
    for moment in (claim.available_at, claim.pushed_at, claim.retry_until):
        assert moment.utcoffset() == timedelta(0)
        assert moment.astimezone(UTC) == moment
