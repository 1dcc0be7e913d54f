"""The job page shows a debounced job's deadline (its first push plus debounce_max)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from tests.admin.test_admin import job_url, make_job

pytestmark = pytest.mark.django_db


def test_a_debounced_job_shows_its_deadline(admin_client):
    until = timezone.now() + timedelta(minutes=1)
    job = make_job("delayed", unique_key="product:1", debounce_until=until)
    html = admin_client.get(job_url("change", job.pk)).content.decode()
    assert "debounced until" in html.lower()
    assert f'<time datetime="{until.isoformat()}"' in html


def test_a_plain_job_shows_no_debounce_row(admin_client):
    job = make_job("delayed")
    html = admin_client.get(job_url("change", job.pk)).content.decode()
    assert "debounced until" not in html.lower()
