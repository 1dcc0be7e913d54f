"""Encrypted arguments at rest, on every store: pushed (some inside a transaction, which
on Redis goes through the outbox), run by a real `queue_work`, some failing for good;
then every place they rest or are shown is read for their plain values: none found.

The places: every row of every laterite table (jobs, failed list, outbox, the job
history, task results...), every Redis key and value under the store's prefix (the
history's records waiting in P:history for a sweep among them), the log records of
this process, the worker's stderr, the worker's spans (an SDK exporter to a file), the
admin's pages for a staff user without `view_job_arguments`, and the output of
queue_failed --json and queue_status --json.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path

import pytest
from django.contrib.auth.models import Permission
from django.db import connection, transaction
from django.test import override_settings
from django.urls import reverse

from laterite_django.models import FailedJob, Job, JobRecord, OutboxJob
from tests.conftest import ROOT, Workers
from tests.testapp.encrypted_jobs import broken, every, named
from tests.testapp.models import Record

pytest.importorskip("opentelemetry.sdk")

# Each distinctive: found anywhere only if it leaked.
SECRETS = {
    "every": ("amy.leak-1@example.org", "tok-leak-every-1"),
    "atomic": ("ben.leak-2@example.org", "tok-leak-atomic-2"),
    "named": "cat.leak-3@example.org",
    "broken": ("eve.leak-5@example.org", "card-4111-leak-5"),
    "debounced": ("fay.leak-6@example.org", "tok-leak-debounce-6"),
    "history": ("gil.leak-7@example.org", "tok-leak-history-7"),
}
HISTORY = {"keep": "7d"}


def plain_values() -> list[str]:
    found: list[str] = []
    for value in SECRETS.values():
        found.extend([value] if isinstance(value, str) else value)
    return found


def laterite_rows() -> str:
    """Every row of every laterite table, as text (on this test's connection, so rows
    of an open transaction are read too)."""
    text = []
    with connection.cursor() as cursor:
        for table in connection.introspection.table_names(cursor):
            if table.startswith("laterite"):
                cursor.execute(f"SELECT * FROM {connection.ops.quote_name(table)}")
                text.append(f"{table}: {cursor.fetchall()!r}")
    return "\n".join(text)


def redis_contents(store) -> str:
    """Every key under the Redis store's prefix and every value it holds, read by its
    type (on its server: a cluster's, the primary of its prefix's slot)."""
    client, prefix = store.client, store.prefix
    text = []
    for key in set(client.scan_iter(match=f"{prefix}:*", count=1000)):
        kind = client.type(key).decode()
        if kind == "string":
            value: object = client.get(key)
        elif kind == "hash":
            value = client.hgetall(key)
        elif kind == "list":
            value = client.lrange(key, 0, -1)
        elif kind == "set":
            value = client.smembers(key)
        elif kind == "zset":
            value = client.zrange(key, 0, -1, withscores=True)
        elif kind == "stream":
            value = client.xrange(key)
        else:
            value = kind
        text.append(f"{key!r} ({kind}): {value!r}")
    return "\n".join(text)


# queue_work with the OpenTelemetry SDK writing every span it ends to a file.
TRACED_WORKER = """
import json, sys
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

OUT = sys.argv[1]

class ToFile(SpanExporter):
    def export(self, spans):
        with open(OUT, "a") as f:
            for s in spans:
                f.write(s.to_json(indent=None) + "\\n")
        return SpanExportResult.SUCCESS

provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(ToFile()))
trace.set_tracer_provider(provider)
sys.argv = ["django", "queue_work", "--stop-when-empty", "--wait-delayed", "3",
            "--verbosity", "3"]
from django.core.management import execute_from_command_line
execute_from_command_line(sys.argv)
"""


def push_all(store_kind: str) -> str:
    """Push every encrypted job; return the outbox's rows as read inside the transaction."""
    email, token = SECRETS["every"]
    every.push(1, email, token=token)
    named.push(2, SECRETS["named"])
    named.push(3, SECRETS["named"])  # a duplicate by its (hashed) unique key
    email, card = SECRETS["broken"]
    broken.push(email, {"card": card})
    email, token = SECRETS["debounced"]
    every.push(4, email, token=token, debounce=0.2, debounce_key=f"deb-{email}")
    with transaction.atomic():
        email, token = SECRETS["atomic"]
        every.push(5, email, token=token)
        inside = laterite_rows()
        if store_kind != "database":
            assert OutboxJob.objects.count() == 1  # the outbox holds it until the commit
    return inside


def finish_unmoved(store, store_kind: str) -> None:
    """Push an encrypted job, claim and settle it with the history kept and no sweep
    after: on Redis its record waits in P:history, on the database stores it is in the
    history table."""
    email, token = SECRETS["history"]
    with override_settings(LATERITE_QUEUE_HISTORY=HISTORY):
        every.push(6, email, token=token)
        [claim] = store.claim(["default"], "host:9", 1)
        assert store.delete([claim]) == 1
    if store_kind != "database":
        assert store.client.llen(f"{store.prefix}:history") == 1


def admin_pages(client, django_user_model) -> str:
    user = django_user_model.objects.create_user("staff", is_staff=True)
    user.user_permissions.set(Permission.objects.filter(
        content_type__app_label="laterite_django", codename__in=("view_job", "view_failedjob")))
    client.force_login(user)
    html = [client.get(reverse("admin:laterite_django_job_changelist")).content.decode(),
            client.get(reverse("admin:laterite_django_failedjob_changelist")).content.decode()]
    for pk in Job.objects.values_list("pk", flat=True):
        html.append(client.get(reverse("admin:laterite_django_job_change", args=[pk])
                               ).content.decode())
    for pk in FailedJob.objects.values_list("pk", flat=True):
        page = client.get(reverse("admin:laterite_django_failedjob_change", args=[pk]))
        assert page.status_code == 200
        html.append(page.content.decode())
    return "\n".join(html)


def test_no_plain_argument_rests_anywhere(store, store_kind, workers: Workers, tmp_path: Path,
                                          caplog, client, django_user_model):
    caplog.set_level(logging.DEBUG)
    places: dict[str, str] = {}
    places["outbox, inside the transaction"] = push_all(store_kind)
    places["tables, pushed"] = laterite_rows()
    if store_kind != "database":
        places["redis, pushed"] = redis_contents(store)

    spans = tmp_path / "spans.jsonl"
    ran = subprocess.run([sys.executable, "-c", TRACED_WORKER, str(spans)], cwd=ROOT,
                         env=workers.env(LATERITE_TEST_LOG_LEVEL="DEBUG",
                                         LATERITE_TEST_HISTORY=json.dumps(HISTORY)),
                         capture_output=True, text=True, timeout=120)
    assert ran.returncode == 0, ran.stderr
    places["worker stderr and stdout"] = ran.stderr + ran.stdout
    places["spans"] = spans.read_text()
    assert "laterite run tests.enc.broken" in places["spans"]
    assert "cannot reach [redacted]" in places["spans"]  # its exception event, scrubbed
    assert "Job tests.enc.broken" in ran.stderr and "started" in ran.stderr  # logged

    # The jobs ran with their arguments as pushed; the broken one failed for good.
    got = sorted(Record.objects.filter(kind__startswith="enc-").values_list("kind", "value"))
    assert got == sorted([
        ("enc-every", "1|{}|{}".format(*SECRETS["every"])),
        ("enc-every", "4|{}|{}".format(*SECRETS["debounced"])),
        ("enc-every", "5|{}|{}".format(*SECRETS["atomic"])),
        ("enc-named", f"2|{SECRETS['named']}"),
    ])
    [failed] = FailedJob.objects.all()
    assert failed.name == "tests.enc.broken" and "[redacted]" in failed.error
    assert JobRecord.objects.count() == 5  # the history of the jobs run (the worker's)

    finish_unmoved(store, store_kind)
    places["tables, run"] = laterite_rows()
    if store_kind != "database":
        places["redis, run"] = redis_contents(store)
        assert f"{store.prefix}:history' (list)" in places["redis, run"]
        with override_settings(LATERITE_QUEUE_HISTORY=HISTORY):
            store.tidy()  # the sweep: P:history's record to the history table
        places["tables, history moved"] = laterite_rows()
    assert JobRecord.objects.count() == 6
    places["queue_failed --json"] = workers.command("queue_failed", "--json").stdout
    places["queue_status --json"] = workers.command("queue_status", "--json").stdout
    places["admin without the permission"] = admin_pages(client, django_user_model)
    places["log records here"] = caplog.text

    assert "[encrypted]" in places["admin without the permission"]
    leaks = [(place, value) for place, text in places.items() for value in plain_values()
             if value in text]
    assert leaks == []
