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


# -- due times: relative ones are counted by the store's clock -----------------------

# A push made by a host whose clock is off (run in `manage.py shell`): each job is
# tagged by its argument. 6 and 7 go inside transaction.atomic() (the Redis store's
# outbox); 8 is pushed an hour away, then made due by the admin's *Run now*.
_PUSHES = """
import datetime
from django.db import transaction
from laterite_django.stores import get_store
from tests.testapp import jobs
jobs.noop.push(1)
jobs.noop.push_in(60, 2)
jobs.noop.push_at(datetime.datetime.fromtimestamp({at}, datetime.UTC), 3)
jobs.noop.push_many([(4,), (5,)])
with transaction.atomic():
    jobs.noop.push_in(60, 6)
    jobs.noop.push(7)
get_store().make_due([jobs.noop.push_in(3600, 8).id])
"""


def _skip_on_sqlite() -> None:
    if connection.vendor == "sqlite":
        pytest.skip("SQLite is one file on one host: its clock is that host's, which "
                    "pushes and claims share (faketime would shift SQLite's own clock too)")


def _store_now(store_kind: str) -> float:
    """The store's clock (PostgreSQL's statement_timestamp(), Redis's TIME), epoch seconds."""
    if store_kind == "redis":
        from django_redis import get_redis_connection

        seconds, micros = get_redis_connection("redis").time()
        return seconds + micros / 1e6
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement_timestamp()")
        return cursor.fetchone()[0].timestamp()


def _dues(store_kind: str) -> dict[tuple, float]:
    """The waiting jobs' due times (epoch seconds) by their positional arguments."""
    from django.conf import settings

    from laterite_django import payload
    from laterite_django.models import Job

    if store_kind == "redis":
        from django_redis import get_redis_connection

        from tests.conftest import job_hashes

        client = get_redis_connection("redis")
        rows = [client.hmget(key, "payload", "available_at")
                for key in job_hashes(client, settings.LATERITE_QUEUE_PREFIX)]
        found = [(text.decode(), int(due) / 1e6) for text, due in rows]
    else:
        found = [(text, due.timestamp()) for text, due in
                 Job.objects.values_list("payload", "available_at")]
    return {tuple(payload.decode(text)[0]): due for text, due in found}


@pytest.mark.parametrize("skew", ["+30s", "-30s"])
def test_relative_due_times_are_counted_by_the_stores_clock(store, workers, skew):
    _skip_on_sqlite()
    library = _libfaketime()
    at = round(_store_now(workers.store_kind)) + 600
    done = workers.command("shell", "-c", _PUSHES.format(at=at), env=_clock(skew, library))
    assert done.returncode == 0, done.stderr
    now = _store_now(workers.store_kind)
    dues = _dues(workers.store_kind)
    assert sorted(dues) == [(i,) for i in range(1, 9)], dues
    # Each is compared with the store's clock read just after the pushes, a few
    # seconds after them at most; a push dated by its host's clock was 30 s off.
    late = {args: round(due - now, 1) for args, due in dues.items()}
    for due_now in [(1,), (4,), (5,), (7,), (8,)]:
        assert -10 < late[due_now] <= 0.5, (skew, due_now, late)
    for in_a_minute in [(2,), (6,)]:
        assert 50 < late[in_a_minute] <= 60.5, (skew, in_a_minute, late)
    assert dues[(3,)] == at  # push_at: the caller's moment, as it was given


@pytest.mark.parametrize("skew", ["+30s", "-30s"])
def test_a_retrys_backoff_is_counted_by_the_stores_clock(store, workers, skew):
    _skip_on_sqlite()
    library = _libfaketime()
    jobs.retry_explicit.push("later", 60)  # raises Retry(delay=60) at its first attempt
    done = workers.run("--stop-when-empty", env=_clock(skew, library))
    assert done.returncode == 0, done.stderr
    now = _store_now(workers.store_kind)
    (due,) = _dues(workers.store_kind).values()
    assert 50 < due - now <= 60.5, (skew, due - now)
