"""The waiting jobs per fair key where an operator looks: `queue_status` (text and
--json) and the admin's overview, on every store."""

from __future__ import annotations

import json
import re
from io import StringIO

from django.core.management import call_command
from django.urls import reverse

from laterite_django import job
from laterite_django.registry import registry
from tests.testapp import jobs

OVERVIEW = reverse("admin:laterite_django_minutecount_changelist")


def run(*args: str) -> str:
    out = StringIO()
    call_command(*args, stdout=out, stderr=StringIO())
    return out.getvalue()


def push_tenants() -> None:
    """tenant:big with 5 waiting jobs, tenant:a with 2, tenant:b with 1 in the default
    queue, and a job of that queue not served fairly (pushed without a fair key)."""
    for i in range(5):
        jobs.fair_record.push("big", i)
    for i in range(2):
        jobs.fair_record.push("a", i)
    jobs.fair_record.push("b", 0)
    jobs.record.push("plain")


def test_queue_status_lists_the_keys_with_the_most_waiting_jobs(store):
    push_tenants()
    store.claim(["default"], "w")  # a claimed job no longer waits
    text = run("queue_status", "--top-keys", "2")
    lines = text.splitlines()
    start = lines.index("waiting per fair key in default (the 2 with the most of 3):")
    assert [line.split() for line in lines[start + 1 : start + 3]] == [
        ["tenant:big", "4"], ["tenant:a", "2"]]
    data = json.loads(run("queue_status", "--json"))
    assert data["default"]["fair_keys"] == {"keys": 3, "top": [
        {"key": "tenant:big", "waiting": 4}, {"key": "tenant:a", "waiting": 2},
        {"key": "tenant:b", "waiting": 1}]}


def test_queue_status_without_fair_queues_says_nothing_of_keys(store):
    jobs.record.push("plain")
    assert "fair key" not in run("queue_status")
    assert json.loads(run("queue_status", "--json"))["default"]["fair_keys"] is None


def test_the_overview_shows_the_waiting_jobs_per_fair_key(admin_client, store):
    push_tenants()
    html = admin_client.get(OVERVIEW).content.decode()
    section = html.split('data-queue="default"', 1)[1].split("</section>", 1)[0]
    table = section.split('data-fact="fair-keys"', 1)[1].split("</table>", 1)[0]
    rows = re.findall(r"<tr><td>(.*?)</td><td>(\d+)</td></tr>", table)
    assert rows == [("<code>tenant:big</code>", "5"), ("<code>tenant:a</code>", "2"),
                    ("<code>tenant:b</code>", "1")]


def test_a_key_of_encrypted_arguments_is_shown_as_its_hash(admin_client, store):
    tenant = "acme-secret-tenant"
    sealed = job("tests.fair_sealed", encrypt=["tenant"],
                 fair_key=lambda tenant: f"tenant:{tenant}")(lambda tenant: None)
    try:
        sealed.push(tenant)
        sealed.push(tenant)
        data = json.loads(run("queue_status", "--json"))["default"]["fair_keys"]
        [(key, waiting)] = [(e["key"], e["waiting"]) for e in data["top"]]
        assert key.startswith("hmac:") and tenant not in key and waiting == 2
        assert tenant not in run("queue_status") and key in run("queue_status")
        html = admin_client.get(OVERVIEW).content.decode()
        assert tenant not in html and f"<code>{key}</code>" in html
    finally:
        registry.unregister(sealed.name)
