"""A running job's progress in the admin's Jobs list (a bar in its state cell) and page."""

from __future__ import annotations

import pytest
from django.utils import timezone

from laterite_django.core.progress import Progress
from tests.admin.test_admin import JOBS, job_url, make_job

pytestmark = pytest.mark.django_db


def said(token: str, done: float, total: float | None, note: str = "") -> str:
    return Progress(done, total, note, timezone.now()).to_text(token)


def test_the_list_shows_a_bar_for_a_running_job_that_said_how_far_it_is(admin_client):
    running = make_job("running", progress=said("t" * 32, 3, 10, "resizing <images>"))
    no_total = make_job("running", token="u" * 32, progress=said("u" * 32, 7, None))
    stale = make_job("running", token="v" * 32, progress=said("an earlier claim", 1, 2))
    html = admin_client.get(JOBS).content.decode()
    assert ('<span class="laterite-progress" title="3/10 (30%) resizing &lt;images&gt;">'
            '<progress max="1" value="0.300"></progress> 3/10 (30%) resizing &lt;images&gt;'
            '</span>') in html
    assert '<span class="laterite-progress" title="7">7</span>' in html
    assert html.count('class="laterite-progress"') == 2  # not the stale one
    assert {running.pk, no_total.pk, stale.pk}


def test_the_job_page_shows_the_progress(admin_client):
    job = make_job("running", progress=said("t" * 32, 1, 4, "first step"))
    html = admin_client.get(job_url("change", job.pk)).content.decode()
    assert "1/4 (25%) first step" in html
    assert 'value="0.250"' in html
    waiting = make_job()
    html = admin_client.get(job_url("change", waiting.pk)).content.decode()
    assert "laterite-progress" not in html.split("</style>", 1)[1]
