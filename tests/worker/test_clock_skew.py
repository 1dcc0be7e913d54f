"""Workers on hosts whose clocks disagree never take a live job from each other.

Each worker runs under libfaketime (Debian's `faketime`), its clock 30 s ahead or
behind, as if on a host of its own; a claim's times come from the store's clock,
so a worker ahead does not take a heartbeating job for abandoned.
"""

from __future__ import annotations

import glob
import os
import signal
from pathlib import Path

import pytest
from django.db import connection

from laterite_django.models import FailedJob
from tests.conftest import ROOT, Stderr, wait_for
from tests.testapp import jobs
from tests.testapp.models import Record

__all__: list[str] = []

pytestmark = pytest.mark.slow

RETRY_AFTER = "10"
# Longer than RETRY_AFTER: only its heartbeats keep the job claimed; and long enough
# that the other workers, once up, sweep several times while it runs.
RUNS_FOR = 16.0
SKEWS = ("+30s", "-30s", "")  # "": the host's own clock
SITE = Path(__file__).resolve().parent / "faketime_site"


def _libfaketime() -> str:
    """The path of libfaketime; skip the test where it is missing (fail it in CI)."""
    found = sorted(glob.glob("/usr/lib/*/faketime/libfaketime.so.1"))
    if found:
        return found[0]
    reason = "libfaketime is not installed (Debian package faketime; .ci/run installs it)"
    if os.environ.get("CI") == "true":
        pytest.fail(reason)
    pytest.skip(reason)


def _clock(skew: str, library: str) -> dict[str, str]:
    """The environment of a worker whose clock is off by `skew` ("" for none)."""
    env = {"LATERITE_TEST_RETRY_AFTER": RETRY_AFTER, "LATERITE_TEST_LOG_LEVEL": "INFO"}
    if skew:
        # Timeouts and sleeps read the monotonic clock, which no host shifts; its
        # sitecustomize sleeps as libfaketime lets it (see there).
        env.update(LD_PRELOAD=library, FAKETIME=skew, FAKETIME_DONT_FAKE_MONOTONIC="1",
                   PYTHONPATH=f"{SITE}{os.pathsep}{ROOT}")
    return env


def _starts() -> list[tuple[str, int]]:
    return list(Record.objects.filter(kind="patient-start").values_list("value", "attempt"))


def _ends() -> list[str]:
    return list(Record.objects.filter(kind="patient-end").values_list("value", flat=True))


@pytest.mark.parametrize("claimer", ["", "-30s"], ids=["claimer-on-time", "claimer-behind"])
def test_a_live_job_is_never_taken_by_a_worker_whose_clock_differs(store, workers, claimer):
    if connection.vendor == "sqlite":
        pytest.skip("SQLite is one file on one host: its workers share that host's clock "
                    "(faketime would shift SQLite's own clock in each worker too)")
    library = _libfaketime()
    jobs.patient.push(RUNS_FOR, "live")  # tries left: a theft runs it again
    first = workers.start("--stop-when-empty", env=_clock(claimer, library))
    first_err = Stderr(first)
    wait_for(_starts, timeout=20)
    # The other clocks come in while the job runs, and sweep every few seconds.
    others = {skew: workers.start(env=_clock(skew, library)) for skew in SKEWS if skew != claimer}
    errs = {skew: Stderr(proc) for skew, proc in others.items()}
    for err in errs.values():  # up: each sweeps at once, then every few seconds
        wait_for(lambda err=err: "queue_work:" in "".join(err.lines), timeout=30)
    assert _ends() == [], "the job ended before the other workers were up: nothing tested"
    assert first.wait(RUNS_FOR + 20) == 0, first_err.text()
    for proc in others.values():
        proc.send_signal(signal.SIGTERM)
    for skew, proc in others.items():
        assert proc.wait(RUNS_FOR + 20) == 0, (skew or "host clock", errs[skew].text())
    assert _starts() == [("live", 1)], [first_err.text(), *(e.text() for e in errs.values())]
    assert _ends() == ["live"]
    assert list(FailedJob.objects.values_list("error", flat=True)) == []
