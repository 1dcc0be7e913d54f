"""An error text no store can keep as is (a NUL, a lone surrogate) is stored escaped:
the job is retried and failed with its readable error, at once, on every store, by a
real `queue_work`."""

from __future__ import annotations

import time

from laterite_django.models import FailedJob
from tests.testapp import jobs
from tests.testapp.models import Record


def test_storable_escapes_nul_and_lone_surrogates_only():
    from laterite_django.core.sizes import storable

    assert storable("plain ascii") == "plain ascii"
    assert storable("caf\u00e9 \U0001f600") == "caf\u00e9 \U0001f600"
    assert storable("a\0b") == "a\\x00b"
    assert storable("x \ud800 y \udcff\0") == "x \\ud800 y \\udcff\\x00"
    assert storable("\u00e9\0\ud83d") == "\u00e9\\x00\\ud83d"


def test_an_error_with_nul_and_lone_surrogates_is_stored_escaped_at_once(store, workers):
    jobs.unstorable_error.push("e")
    jobs.record.push("after")
    started = time.monotonic()
    result = workers.run("--stop-when-empty", timeout=60)
    took = time.monotonic() - started
    assert result.returncode == 0, result.stderr
    # Retried once (the Retry's text released with the job), then failed for good.
    assert list(Record.objects.filter(kind="unstorable").values_list("attempt", flat=True)
                .order_by("attempt")) == [1, 2], result.stderr
    assert Record.objects.filter(kind="record", value="after").exists()
    row = FailedJob.objects.get()
    assert row.name == "tests.unstorable_error" and row.attempts == 2
    assert row.error.startswith("ValueError: raised e\\x00nul \\udcff lone"), row.error
    assert "\0" not in row.error
    assert "DataError" not in result.stderr and "UnicodeEncodeError" not in result.stderr
    assert "Worker error" not in result.stderr, result.stderr
    assert took < 30  # settled at once, not left claimed until RETRY_AFTER (90 s)
