"""The admin's overview page: per queue, a chart of the last hour and what waits."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from laterite_django.core.minutes import Minute, minute_start
from tests.admin.test_admin import redis_down  # noqa: F401 -- a fixture
from tests.testapp import jobs

OVERVIEW = reverse("admin:laterite_django_minutecount_changelist")


def fact(html: str, queue: str, name: str) -> str:
    section = html.split(f'data-queue="{queue}"', 1)[1].split("</section>", 1)[0]
    return re.search(rf'data-fact="{name}">(.*?)</dd>', section, re.S).group(1)


def test_the_overview_charts_each_queue(admin_client, store):
    now = minute_start(timezone.now())
    store.add_minutes([Minute("default", now - timedelta(minutes=5), 7, 2),
                       Minute("default", now, 3, 0),
                       Minute("mail", now - timedelta(minutes=90), 4, 0)])  # over an hour ago
    jobs.record.enqueue(("waiting",), {}, at=timezone.now() - timedelta(minutes=3))
    response = admin_client.get(OVERVIEW)
    assert response.status_code == 200
    html = response.content.decode()
    assert "<title>Overview" in html
    assert fact(html, "default", "waiting") == "1"
    assert fact(html, "default", "oldest").startswith("3 min")
    assert "10 succeeded" in fact(html, "default", "hour")
    assert "2 failed" in fact(html, "default", "hour")
    assert fact(html, "mail", "oldest") == "none waits"
    assert "0 succeeded" in fact(html, "mail", "hour")
    section = html.split('data-queue="default"', 1)[1].split("</section>", 1)[0]
    default, day = section.split("</svg>")[:2]  # the hour's chart, then the day's
    assert default.count('class="laterite-bar-ok"') == 2
    assert default.count('class="laterite-bar-failed"') == 1
    assert re.search(r"[56] min ago: 7 succeeded, 2 failed", default)  # a bar's title
    assert "9 / min" in default  # the scale: the busiest minute
    # The day's chart: the mail queue's minute of 90 min ago counts there.
    assert "10 succeeded" in fact(html, "default", "day") and "4 succeeded" in fact(
        html, "mail", "day")
    assert "last 24 hours" in day and "12 / 15 min" in day
    # It is in the app's list, and read-only.
    index = admin_client.get(reverse("admin:app_list", args=["laterite_django"])).content
    assert OVERVIEW.encode() in index
    assert b"Overview" in index


def test_the_day_chart_holds_24_hours_by_quarters(admin_client, store):
    now = minute_start(timezone.now())
    store.add_minutes([Minute("low", now - timedelta(hours=23, minutes=50), 5, 1),
                       Minute("low", now - timedelta(hours=12), 2, 3),
                       Minute("low", now - timedelta(minutes=14), 1, 0),
                       Minute("low", now - timedelta(hours=24, minutes=5), 100, 100)])  # older
    html = admin_client.get(OVERVIEW).content.decode()
    assert "8 succeeded" in fact(html, "low", "day") and "4 failed" in fact(html, "low", "day")
    assert "0 succeeded" in fact(html, "low", "hour") or "1 succeeded" in fact(html, "low",
                                                                               "hour")
    section = html.split('data-queue="low"', 1)[1].split("</section>", 1)[0]
    day = section.split("</svg>")[1]
    assert day.count('class="laterite-bar-ok"') == 3 and day.count(
        'class="laterite-bar-failed"') == 2
    assert "from 12 h 14 min ago to 12 h ago: 2 succeeded, 3 failed" in day
    assert "the last 15 min: 1 succeeded, 0 failed" in day


def test_the_overview_says_which_queue_is_paused(admin_client, store):
    jobs.mail.push("waits")
    store.pause(["mail", "quiet"])  # `quiet`: paused, with no job and not configured
    html = admin_client.get(OVERVIEW).content.decode()
    assert fact(html, "mail", "paused") == "paused: its workers take none of its jobs"
    assert fact(html, "quiet", "paused") == "paused: its workers take none of its jobs"
    assert fact(html, "mail", "waiting") == "1"
    assert 'data-fact="paused"' not in html.split('data-queue="default"', 1)[1].split(
        "</section>", 1)[0]
    assert "once queues can be paused" not in html


@pytest.mark.django_db
def test_the_overview_says_when_the_store_cannot_be_read(admin_client, redis_down):  # noqa: F811
    response = admin_client.get(OVERVIEW)
    assert response.status_code == 200
    assert "The queue store cannot be read" in response.content.decode()


@pytest.mark.django_db
def test_staff_without_the_view_permission_gets_403(client, django_user_model):
    user = django_user_model.objects.create_user("s", password="pw", is_staff=True)
    client.force_login(user)
    assert client.get(OVERVIEW).status_code == 403
