"""The Jobs list on the Redis store lists the jobs waiting, delayed and running in
Redis (stores/redis/browse.py, admin/store_jobs.py), filters and searches them within
a bounded window, and says how much of Redis it read."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from laterite_django.admin import store_jobs as store_jobs_module
from laterite_django.stores import get_store
from laterite_django.stores.redis import browse
from tests.conftest import redis_store_only
from tests.testapp import jobs

JOBS = reverse("admin:laterite_django_job_changelist")
PREFIX = f"laterite-test-redisjobs-{os.getpid()}"


@pytest.fixture
def redis_store(transactional_db) -> Iterator[object]:
    with redis_store_only(PREFIX):
        store = get_store()
        yield store
        store.close()


def listed(response) -> dict[int, str]:
    """The Redis rows of a page: id -> state."""
    assert response.status_code == 200, response.status_code
    html = response.content.decode()
    block = html.split('id="laterite-store-jobs"', 1)[1].split("Jobs left in the database", 1)[0]
    return {int(i): s for i, s in re.findall(r'data-job="(\d+)" data-state="(\w+)"', block)}


@pytest.fixture
def pushed(redis_store):
    """Jobs in each state: two waiting of `default`, one delayed of `mail`, one running
    of `low` (claimed)."""
    order = jobs.add.enqueue((), {"a": 8812, "b": 1})
    other = jobs.add.enqueue((), {"a": 7, "b": 2})
    later = jobs.mail.enqueue(("soon",), {}, at=timezone.now() + timedelta(hours=1))
    running = jobs.low.enqueue(("now",), {})
    [claim] = redis_store.claim(["low"], "host:123")
    assert claim.id == running.id
    return {"order": order.id, "other": other.id, "later": later.id, "running": running.id}


def test_the_list_shows_the_jobs_in_redis_in_each_state(admin_client, pushed):
    response = admin_client.get(JOBS)
    assert listed(response) == {pushed["order"]: "waiting", pushed["other"]: "waiting",
                                pushed["later"]: "delayed", pushed["running"]: "running"}
    html = response.content.decode()
    assert "Read all 4 jobs" in html
    assert "host:<wbr>123" in html  # who claimed the running one
    assert "at most 10000 jobs" in html  # the window, said on the page


def test_the_filters_and_the_search_apply_to_the_jobs_in_redis(admin_client, pushed):
    assert set(listed(admin_client.get(JOBS, {"queue": "default"}))) == {
        pushed["order"], pushed["other"]}
    assert set(listed(admin_client.get(JOBS, {"state": "delayed"}))) == {pushed["later"]}
    assert set(listed(admin_client.get(JOBS, {"state": "running"}))) == {pushed["running"]}
    assert set(listed(admin_client.get(JOBS, {"state": "held"}))) == set()
    assert set(listed(admin_client.get(JOBS, {"name": "tests.mail"}))) == {pushed["later"]}
    assert set(listed(admin_client.get(JOBS, {"arg": "a=8812"}))) == {pushed["order"]}
    assert set(listed(admin_client.get(JOBS, {"arg": ["a=8812", "b=2"]}))) == set()
    assert set(listed(admin_client.get(JOBS, {"arg": "0=soon"}))) == {pushed["later"]}
    assert set(listed(admin_client.get(JOBS, {"q": "TESTS.LOW"}))) == {pushed["running"]}
    assert set(listed(admin_client.get(JOBS, {"q": "8812"}))) == {pushed["order"]}
    since = (timezone.now() + timedelta(minutes=1)).isoformat()
    assert set(listed(admin_client.get(JOBS, {"since": since}))) == set()
    html = admin_client.get(JOBS, {"arg": "nonsense"}).content.decode()
    assert "is not KEY=VALUE" in html


def test_the_window_bounds_what_is_read_and_the_page_says_so(admin_client, redis_store,
                                                             monkeypatch):
    jobs.add.push_many([(i, 0) for i in range(30)])
    jobs.mail.push_many([(f"m{i}",) for i in range(5)])
    monkeypatch.setattr(store_jobs_module, "WINDOW", 10)
    response = admin_client.get(JOBS)
    rows = listed(response)
    assert len(rows) == 10
    html = response.content.decode()
    assert "Read 10 of the 35 jobs" in html and "at most 10 jobs" in html
    assert 'data-window-full="1"' in html
    # Shared among the sets: the small queue's five, and five of the big one's first.
    assert sum(state == "waiting" for state in rows.values()) == 10
    by_queue = browse.JobBrowser(redis_store.prefix, lambda: redis_store.client,
                                 redis_store.queues).browse(window=10)
    assert sorted(job.queue for job in by_queue.jobs).count("mail") == 5
    assert by_queue.total == 35 and by_queue.window_full


def test_pages_of_a_hundred(admin_client, redis_store):
    jobs.add.push_many([(i, 0) for i in range(130)])
    first = admin_client.get(JOBS)
    assert len(listed(first)) == 100
    html = first.content.decode()
    assert "130 matches; 1&ndash;100 shown" in html
    second = admin_client.get(JOBS, {"rp": "1"})
    assert len(listed(second)) == 30
    assert set(listed(first)).isdisjoint(listed(second))

