"""`queue_batches`: the batches listed, filtered and cancelled, on every store, with real
batches pushed and run by the worker's rules (testing.run_jobs)."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from laterite_django import batch
from laterite_django.models import Batch, FailedJob
from laterite_django.testing import run_jobs
from tests.testapp.jobs import member, record, step
from tests.testapp.models import Record

pytestmark = pytest.mark.django_db(transaction=True)


def run(*args: str) -> str:
    out = StringIO()
    call_command("queue_batches", *args, stdout=out, stderr=StringIO())
    return out.getvalue()


def run_failing(*args: str) -> tuple[str, str]:
    """Run a command that ends in a CommandError: what it printed, and the error."""
    out = StringIO()
    with pytest.raises(CommandError) as e:
        call_command("queue_batches", *args, stdout=out, stderr=StringIO())
    return out.getvalue(), str(e.value)


def records(value: str) -> int:
    return Record.objects.filter(kind="record", value=value).count()


def three_batches() -> tuple[Batch, Batch, Batch]:
    """A batch that finished, one that failed (run), then one still running (not run)."""
    Record.objects.create(kind="gate", value="2")
    done = batch([member.call(i) for i in (0, 1)], name="all-good").push()
    failed = batch([member.call(i) for i in (2, 3, 4)], name="one-gated").push()
    run_jobs()
    running = batch([step.call(f"s{i}") for i in range(4)], name="waiting").push()
    return done, failed, running


def test_lists_the_batches_newest_first_with_their_counts(store):
    done, failed, running = three_batches()
    header, *rows = run().splitlines()
    assert header.split() == ["id", "name", "state", "total", "succeeded", "failed", "pending",
                              "created", "finished"]
    cells = [row.split() for row in rows]
    assert [c[0] for c in cells] == [str(running.pk), str(failed.pk), str(done.pk)]
    # id, name, state, total, succeeded, failed, pending; then two dates (or "-").
    assert cells[0][:7] == [str(running.pk), "waiting", "running", "4", "0", "0", "4"]
    assert cells[0][-1] == "-"
    assert cells[1][:7] == [str(failed.pk), "one-gated", "failed", "3", "2", "1", "0"]
    assert cells[2][:7] == [str(done.pk), "all-good", "finished", "2", "2", "0", "0"]
    data = json.loads(run("--json"))
    assert [d["id"] for d in data] == [running.pk, failed.pk, done.pk]
    assert {k: data[1][k] for k in ("name", "state", "total", "succeeded", "failed",
                                    "pending")} == {
        "name": "one-gated", "state": "failed", "total": 3, "succeeded": 2, "failed": 1,
        "pending": 0}
    assert data[0]["finished_at"] is None and data[1]["finished_at"] is not None
    assert data[1]["caught_at"] is not None  # its first failure, counted
    assert data[1]["callbacks"] == {}


def test_filters_by_state_and_limits(store):
    done, failed, running = three_batches()
    for state, expected in (("running", running), ("finished", done), ("failed", failed)):
        assert [d["id"] for d in json.loads(run("--json", "--state", state))] == [expected.pk]
    assert run("--state", "cancelled") == "No cancelled batches.\n"
    assert [d["id"] for d in json.loads(run("--json", "--limit", "2"))] == [running.pk,
                                                                           failed.pk]
    Batch.objects.all().delete()
    assert run() == "No batches.\n"


def test_json_shows_the_callbacks_as_calls(store):
    b = batch([step.call("a")], then=record.call("then"), catch=record.call("catch"),
              finally_=record.call("finally")).push()
    (data,) = json.loads(run("--json"))
    assert data["id"] == b.pk and data["name"] == ""
    assert data["callbacks"] == {"then": 'tests.record("then")',
                                 "catch": 'tests.record("catch")',
                                 "finally_": 'tests.record("finally")'}
    assert run().splitlines()[1].split()[1] == "-"  # no name


def test_cancel_removes_what_waits_and_pushes_finally_only(store):
    b = batch([step.call(f"s{i}") for i in range(3)], then=record.call("then"),
              catch=record.call("catch"), finally_=record.call("finally"), name="album").push()
    said = run("--cancel", str(b.pk), "--no-input")
    # Removed at once, counted as ended: finally_ is pushed now.
    assert said == f"Batch {b.pk} (album): cancelled, 3 waiting jobs removed now.\n"
    assert store.counts()["default"].waiting == 1  # the finally_ callback, pushed
    run_jobs()
    b.refresh_from_db()
    assert not Record.objects.filter(kind="step").exists()
    assert (b.state, b.pending, b.failed) == ("cancelled", 0, 0)
    assert b.finished_at is not None
    assert (records("then"), records("catch"), records("finally")) == (0, 0, 1)
    assert "default" not in store.counts() and not FailedJob.objects.exists()
    assert run("--cancel", str(b.pk), "--no-input") == (
        f"Batch {b.pk} (album): cancelled already; nothing changed.\n")
    assert [d["id"] for d in json.loads(run("--json", "--state", "cancelled"))] == [b.pk]


def test_cancel_says_what_is_left_to_end(store):
    b = batch([step.call(f"s{i}") for i in range(3)], finally_=record.call("finally")).push()
    store.claim(["default"], "w")  # one claimed: its worker drops it unrun, or it runs
    said = run("--cancel", str(b.pk), "--no-input")
    assert said == (f"Batch {b.pk}: cancelled, 2 waiting jobs removed now; 1 job not ended "
                    f"yet (running ones finish, the others are dropped by the worker that "
                    f"claims them).\n")
    b.refresh_from_db()
    assert (b.state, b.pending, b.finished_at) == ("cancelled", 1, None)
    counts = store.counts()["default"]
    assert (counts.waiting, counts.running) == (0, 1)  # finally_ waits for the claimed one


def test_cancelling_a_finished_batch_changes_nothing(store):
    done, failed, _ = three_batches()
    said = run("--cancel", str(done.pk), str(failed.pk), "--no-input")
    assert said.splitlines() == [
        f"Batch {done.pk} (all-good): finished already (finished); nothing changed.",
        f"Batch {failed.pk} (one-gated): finished already (failed); nothing changed.",
    ]
    assert not Batch.objects.filter(cancelled_at__isnull=False).exists()


def test_an_unknown_id_is_named_and_the_others_are_cancelled(store):
    b = batch([step.call("a")], name="x").push()
    printed, error = run_failing("--cancel", "999999", str(b.pk), "999999", "--no-input",
                                 "--json")
    assert error == "No batch has id 999999."
    outcomes = json.loads(printed)
    assert [(d["id"], d["outcome"]) for d in outcomes] == [(999999, "unknown"),
                                                          (b.pk, "cancelled")]
    assert Batch.objects.get(pk=b.pk).cancelled_at is not None


def test_cancel_asks_first_and_exits_1_on_an_unknown_id(store, workers):
    b = batch([step.call("a")]).push()
    # No terminal to ask: refuse and change nothing.
    result = workers.command("queue_batches", "--cancel", str(b.pk))
    assert result.returncode == 1 and "--no-input" in result.stderr
    assert Batch.objects.get(pk=b.pk).cancelled_at is None
    result = workers.command("queue_batches", "--cancel", "424242", "--no-input")
    assert result.returncode == 1
    assert result.stdout == "Batch 424242: no such batch.\n"
    assert result.stderr == "CommandError: No batch has id 424242.\n"


@pytest.mark.parametrize(("args", "message"), [
    (["--state", "done"], "invalid choice: 'done'"),
    (["--limit", "0"], "'0' must be 1 or more"),
    (["--limit", "many"], "'many' is not a whole number"),
    (["--cancel", "abc"], "'abc' is not a whole number"),
    (["--cancel", "-3"], "'-3' must be 1 or more"),
    (["--cancel", "1", "--state", "running"], "--cancel takes batch ids only, not --state"),
    (["--cancel", "1", "--limit", "5"], "--cancel takes batch ids only, not --limit"),
])
def test_bad_arguments_name_the_bad_value(store, args, message):
    b = batch([step.call("a")]).push()
    with pytest.raises(CommandError) as e:
        run(*args)
    assert message in str(e.value)
    assert Batch.objects.get(pk=b.pk).cancelled_at is None
