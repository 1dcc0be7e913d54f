"""The admin's workers page, on every store, and its link on the overview."""

from __future__ import annotations

from django.urls import reverse

from laterite_django.models import WorkerRecord
from tests.admin.test_admin import redis_down  # noqa: F401 -- a fixture
from tests.stores.test_store_workers import info, set_beat_back

WORKERS = reverse("admin:laterite_django_workerrecord_changelist")
OVERVIEW = reverse("admin:laterite_django_minutecount_changelist")


def row(html: str, worker_id: str) -> str:
    return html.split(f'data-worker="{worker_id}"', 1)[1].split("</tr>", 1)[0]


def test_the_workers_page_lists_each_worker_alive_or_lost(admin_client, store):
    store.beat_worker(info("web-1:4242", name="web-1:4242", queues=["default", "mail"],
                           concurrency=4, jobs=[17, 18]))
    store.beat_worker(info("web-2:77"))
    set_beat_back(store, "web-2:77", 200)
    response = admin_client.get(WORKERS)
    assert response.status_code == 200
    html = response.content.decode()
    assert "<title>Workers" in html
    alive = row(html, "web-1:4242")
    assert ">web-1<" in alive and ">4242<" in alive and ">1.2.3<" in alive
    assert "default, mail" in alive and ">4<" in alive
    assert reverse("admin:laterite_django_job_change", args=[17]) in alive
    assert ">#18<" in alive
    assert "laterite-state-running\">alive<" in alive
    lost = row(html, "web-2:77")
    assert "3 min" in lost  # its last beat, 200 s ago
    assert "laterite-state-abandoned\">lost<" in lost
    assert "1 alive" in html and "1 lost" in html

    overview = admin_client.get(OVERVIEW).content.decode()
    assert f'<a href="{WORKERS}">Workers</a>' in overview
    assert "1 alive" in overview and "1 lost" in overview


def test_no_worker_says_how_to_start_one(admin_client, store):
    html = admin_client.get(WORKERS).content.decode()
    assert "No worker is running" in html


def test_a_row_link_leads_back_to_the_list(admin_client, store):
    store.beat_worker(info("web-1:1"))
    response = admin_client.get(
        reverse("admin:laterite_django_workerrecord_change", args=["web-1:1"]))
    assert response.status_code == 302 and response["Location"] == WORKERS


def test_the_page_says_when_the_store_cannot_be_read(admin_client, redis_down):  # noqa: F811
    response = admin_client.get(WORKERS)
    assert response.status_code == 200
    assert "The queue store cannot be read" in response.content.decode()
    assert not WorkerRecord.objects.exists()
