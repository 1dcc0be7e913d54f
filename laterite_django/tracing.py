"""OpenTelemetry traces (the `otel` extra: opentelemetry-api only).

A push made inside a span records that span's context with the job: the
propagator's fields (`traceparent`, and `tracestate` if any) under the key
"trace" of the job's stored payload, next to "args" and "kwargs". That needs no
column and no store change, travels with the job through every store, retry and
the failed list's retry, and costs nothing when there is no span.

Each attempt runs in a span `laterite run <job>` (kind CONSUMER) with the
attributes `laterite.id`, `laterite.job`, `laterite.queue`, `laterite.attempt`
and `laterite.outcome` (succeeded, retried, failed); an exception the job
raised is recorded on it, and the span's status is ERROR unless it succeeded or snoozed.
The span is current while the job runs, so the job's own spans (and its pushes)
nest under it.

Parent or link: an attempt that starts within `LINK_AFTER` of the push is a
child of the push's span, so a request, the jobs it pushed and their quick
retries read as one trace. An attempt that starts later (a job pushed for
tomorrow, a retry after a long backoff) starts a trace of its own with a *link*
to the push's span: tracing backends assemble a trace within minutes of its
first span, and a child arriving hours later would hang off a trace already
closed (or sampled away), stretching its timeline over hours.

Nothing happens, and nothing is paid but one check per push and per attempt,
while opentelemetry-api is not installed or no tracer provider is configured.
"""

from __future__ import annotations

import json
import os
import traceback
from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from django.utils import timezone

from .encryption import scrub

try:  # the `otel` extra
    from opentelemetry import context as otel_context
    from opentelemetry import propagate, trace
    from opentelemetry.trace import Link, SpanKind, Status, StatusCode
except ImportError:  # pragma: no cover - the package works without it
    trace = None  # type: ignore[assignment]

if TYPE_CHECKING:
    from .core.values import Claim

__all__ = ["LINK_AFTER", "AttemptSpan", "attempt_span", "carrier", "enabled", "trace_of"]

# Whether the API keeps its provider where `enabled` can look cheaply (else it asks
# get_tracer_provider() each time), and whether the environment names one.
_GLOBAL_READABLE = trace is not None and hasattr(trace, "_TRACER_PROVIDER")
_FROM_ENVIRONMENT = "OTEL_PYTHON_TRACER_PROVIDER" in os.environ
# An attempt starting longer than this after its push links to the push's span
# instead of being its child (see above).
LINK_AFTER = timedelta(minutes=15)
# The payload's key for the push's trace context.
KEY = "trace"
# How a settled attempt is named in `laterite.outcome` (the metrics' words).
OUTCOMES = {"succeeded": "succeeded", "retrying": "retried", "failed": "failed",
            "snoozed": "snoozed"}
# Outcomes that are not errors: the job did what it meant to (a snooze is its own word).
NOT_ERRORS = frozenset({"succeeded", "snoozed"})


def enabled() -> bool:
    """True when opentelemetry-api is installed and a tracer provider is configured."""
    if trace is None:
        return False
    if _GLOBAL_READABLE and trace._TRACER_PROVIDER is None and not _FROM_ENVIRONMENT:
        # None set: the common case, without get_tracer_provider()'s look at os.environ
        # (a microsecond or two per attempt).
        return False
    provider = trace.get_tracer_provider()
    return not isinstance(provider, (trace.ProxyTracerProvider, trace.NoOpTracerProvider))


def carrier() -> dict[str, str] | None:
    """The current span's context as the propagator's fields, to store with a push;
    None when there is no recording span (or no OpenTelemetry)."""
    if trace is None:
        return None
    if not trace.get_current_span().get_span_context().is_valid:
        return None
    fields: dict[str, str] = {}
    propagate.inject(fields)
    return fields or None


def trace_of(text: str) -> Mapping[str, str] | None:
    """The trace context stored in a job's payload text, or None."""
    if f'"{KEY}":' not in text:
        return None
    try:
        fields = json.loads(text).get(KEY)
    except (ValueError, AttributeError):
        return None
    if not isinstance(fields, dict):
        return None
    return {str(k): str(v) for k, v in fields.items()}


class AttemptSpan:
    """The span of one attempt, current in the worker's thread until `end`."""

    def __init__(self, claim: Claim) -> None:
        fields = trace_of(claim.payload) or {}
        pushed = propagate.extract(fields) if fields else None
        links = []
        parent = pushed
        if pushed is not None and timezone.now() - claim.pushed_at > LINK_AFTER:
            pushed_span = trace.get_current_span(pushed).get_span_context()
            if pushed_span.is_valid:
                links.append(Link(pushed_span, {"laterite.link": "push"}))
            parent = otel_context.Context()  # a new trace
        tracer = trace.get_tracer("laterite_django")
        self.span = tracer.start_span(
            f"laterite run {claim.name}", context=parent, kind=SpanKind.CONSUMER, links=links,
            attributes={"laterite.id": str(claim.id), "laterite.job": claim.name,
                        "laterite.queue": claim.queue, "laterite.attempt": claim.attempts},
        )
        self._token = otel_context.attach(trace.set_span_in_context(self.span))

    def raised(self, error: BaseException, secrets: Sequence[Any] = ()) -> None:
        """Record what the job raised; for an encrypted job, its message and traceback
        scrubbed of the arguments' plain forms (`secrets`: see encryption.scrub)."""
        if not secrets:
            self.span.record_exception(error)
            return
        stack = "".join(traceback.format_exception(type(error), error, error.__traceback__))
        self.span.record_exception(error, attributes={
            "exception.message": scrub(str(error), secrets),
            "exception.stacktrace": scrub(stack, secrets)})

    def end(self, settled: str) -> None:
        """End the span with how the attempt was settled (a `Settled` word)."""
        try:
            outcome = OUTCOMES.get(settled, settled)
            self.span.set_attribute("laterite.outcome", outcome)
            if outcome not in NOT_ERRORS:
                self.span.set_status(Status(StatusCode.ERROR, outcome))
            self.span.end()
        finally:
            otel_context.detach(self._token)


def attempt_span(claim: Claim) -> AttemptSpan | None:
    """Start the span of an attempt of `claim`; None when tracing is off."""
    if not enabled():
        return None
    return AttemptSpan(claim)


