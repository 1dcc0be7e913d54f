"""OpenTelemetry: a push inside a span, the attempts' spans joined to it, on every store.

The SDK's in-memory exporter collects the spans. A tracer provider can be set once
per process: the first test here sets it for the rest of the session.
"""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import timedelta

import pytest

from laterite_django import tracing
from laterite_django.testing import run_jobs
from tests.conftest import ROOT
from tests.testapp import jobs

pytest.importorskip("opentelemetry.sdk")
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

_EXPORTER = InMemorySpanExporter()


@pytest.fixture
def spans():
    """The spans ended during the test."""
    if not isinstance(trace.get_tracer_provider(), TracerProvider):
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(_EXPORTER))
        trace.set_tracer_provider(provider)
    _EXPORTER.clear()
    yield _EXPORTER
    _EXPORTER.clear()


def runs(exporter: InMemorySpanExporter, name: str) -> list:
    return [s for s in exporter.get_finished_spans() if s.name == f"laterite run {name}"]


def test_the_attempts_are_children_of_the_push(store, spans):
    tracer = trace.get_tracer("tests")
    with tracer.start_as_current_span("request") as request:
        jobs.flaky.push("traced", 2)  # fails once, then succeeds
    jobs.add.push(1, 2)  # outside any span
    assert run_jobs(wait_delayed=1) == 3

    first, second = runs(spans, "tests.flaky")
    pushed = request.get_span_context()
    for span, attempt, outcome in ((first, 1, "retried"), (second, 2, "succeeded")):
        assert span.context.trace_id == pushed.trace_id
        assert span.parent.span_id == pushed.span_id
        assert span.kind is SpanKind.CONSUMER
        assert span.attributes["laterite.job"] == "tests.flaky"
        assert span.attributes["laterite.queue"] == "default"
        assert span.attributes["laterite.attempt"] == attempt
        assert span.attributes["laterite.outcome"] == outcome
        assert span.attributes["laterite.id"]
    assert first.status.status_code is StatusCode.ERROR
    [event] = first.events
    assert event.name == "exception"
    assert event.attributes["exception.message"] == "flaky attempt 1"
    assert not second.events

    [untraced] = runs(spans, "tests.add")
    assert untraced.parent is None  # a trace of its own
    assert untraced.attributes["laterite.outcome"] == "succeeded"


def test_a_job_pushed_by_a_job_runs_under_its_attempt(store, spans):
    with trace.get_tracer("tests").start_as_current_span("request") as request:
        jobs.push_record.push("child")
    assert run_jobs() == 2
    [parent] = runs(spans, "tests.push_record")
    [child] = runs(spans, "tests.record")
    assert parent.parent.span_id == request.get_span_context().span_id
    assert child.parent.span_id == parent.context.span_id
    assert child.context.trace_id == request.get_span_context().trace_id


def test_a_failed_attempt_says_so(store, spans):
    with trace.get_tracer("tests").start_as_current_span("request"):
        jobs.fail_now.push("x")
    run_jobs()
    [span] = runs(spans, "tests.fail_now")
    assert span.attributes["laterite.outcome"] == "failed"
    assert span.status.status_code is StatusCode.ERROR
    assert span.events[0].attributes["exception.type"].endswith("Fail")


def test_a_snoozed_attempt_is_not_an_error(store, spans):
    jobs.snoozy.push("t", times=1, seconds=60)
    run_jobs()
    [span] = runs(spans, "tests.snoozy")
    assert span.attributes["laterite.outcome"] == "snoozed"
    assert span.status.status_code is not StatusCode.ERROR


def test_an_attempt_long_after_its_push_links_to_it(store, spans, monkeypatch):
    with trace.get_tracer("tests").start_as_current_span("request") as request:
        jobs.record.push("late")
    # Every push is "long past": the attempt starts a trace of its own, linked.
    monkeypatch.setattr(tracing, "LINK_AFTER", timedelta(seconds=-1))
    run_jobs()
    [span] = runs(spans, "tests.record")
    assert span.parent is None
    assert span.context.trace_id != request.get_span_context().trace_id
    [link] = span.links
    assert link.context.span_id == request.get_span_context().span_id


def test_nothing_is_stored_without_a_span(store, spans):
    jobs.add.push(1, 2)
    [claim] = store.claim(["default"], "w")
    assert json.loads(claim.payload) == {"args": [1, 2], "kwargs": {}}


def test_a_worker_process_joins_the_trace(workers, tmp_path):
    """A real `queue_work` with the SDK configured by its settings (a file exporter)."""
    out = tmp_path / "spans.jsonl"
    script = f"""
import json, sys
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

class ToFile(SpanExporter):
    def export(self, spans):
        with open({str(out)!r}, "a") as f:
            for s in spans:
                f.write(json.dumps({{"name": s.name, "trace": s.context.trace_id,
                    "parent": s.parent.span_id if s.parent else None,
                    "outcome": s.attributes.get("laterite.outcome")}}) + "\\n")
        return SpanExportResult.SUCCESS

provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(ToFile()))
trace.set_tracer_provider(provider)
sys.argv = ["django", "queue_work", "--stop-when-empty"]
from django.core.management import execute_from_command_line
execute_from_command_line(sys.argv)
"""
    with trace.get_tracer("tests").start_as_current_span("request") as request:
        jobs.record.push("in a worker")
    ran = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=workers.env(),
                         capture_output=True, text=True, timeout=60)
    assert ran.returncode == 0, ran.stderr
    [span] = [json.loads(line) for line in out.read_text().splitlines()]
    assert span == {"name": "laterite run tests.record",
                    "trace": request.get_span_context().trace_id,
                    "parent": request.get_span_context().span_id, "outcome": "succeeded"}
