"""The queue_* management commands, on every store."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from laterite_django.models import FailedJob
from tests.testapp import jobs


def run(*args: str) -> str:
    out = StringIO()
    call_command(*args, stdout=out, stderr=StringIO())
    return out.getvalue()


def fail_some(store, count: int = 2) -> list[int]:
    for i in range(count):
        jobs.record.push(f"v{i}")
    for _ in range(count):
        store.fail(store.claim(["default"], "w")[0], f"Boom: broken\n\ntraceback {_}")
    return list(FailedJob.objects.order_by("id").values_list("id", flat=True))


def test_status_shows_each_queue(store):
    jobs.record.push("a")
    jobs.mail.push("m")
    from datetime import timedelta

    jobs.mail.push_in(timedelta(hours=1), "later")
    store.claim(["default"], "w")
    text = run("queue_status")
    lines = text.splitlines()
    assert lines[0].split() == ["queue", "waiting", "delayed", "running", "failed"]
    assert ["default", "0", "0", "1", "0"] in [line.split() for line in lines]
    assert ["mail", "1", "1", "0", "0"] in [line.split() for line in lines]
    assert lines[-1] == "failed total: 0"
    data = json.loads(run("queue_status", "--json"))
    # The four states, and the names of 0.1 (pending, reserved) for one more release.
    assert data["mail"] == {"waiting": 1, "delayed": 1, "running": 0, "failed": 0,
                            "pending": 1, "reserved": 0}
    assert data["default"]["running"] == data["default"]["reserved"] == 1


def test_failed_lists_a_table_and_json(store):
    ids = fail_some(store)
    text = run("queue_failed")
    header, *rows = text.splitlines()
    assert header.split()[:4] == ["id", "name", "queue", "attempts"]
    assert len(rows) == 2 and rows[0].split()[0] == str(ids[1])  # newest first
    assert rows[0].endswith("Boom: broken")
    data = json.loads(run("queue_failed", "--json"))
    assert [d["id"] for d in data] == ids[::-1] and data[0]["error"].startswith("Boom")
    assert run("queue_failed", "--queue", "mail") == "No failed jobs.\n"
    assert run("queue_failed", "--name", "tests.mail") == "No failed jobs.\n"
    assert [d["id"] for d in json.loads(run("queue_failed", "--json", "--limit", "1"))] == [
        ids[1]]
    by_name = json.loads(run("queue_failed", "--json", "--queue", "default", "--name",
                             "tests.record"))
    assert [d["id"] for d in by_name] == ids[::-1]


def test_retry_by_id_and_all(store):
    ids = fail_some(store, 3)
    assert run("queue_retry", str(ids[0])) == "1 job put back on their queues.\n"
    assert store.counts()["default"].waiting == 1
    assert run("queue_retry", "--all") == "2 jobs put back on their queues.\n"
    assert FailedJob.objects.count() == 0 and store.counts()["default"].waiting == 3


def test_retry_refuses_bad_arguments_and_changes_nothing(store):
    ids = fail_some(store, 1)
    with pytest.raises(CommandError, match="No failed job has id 999"):
        run("queue_retry", str(ids[0]), "999")
    with pytest.raises(CommandError, match="ids or --all, not both"):
        run("queue_retry", str(ids[0]), "--all")
    with pytest.raises(CommandError, match="Give one or more failed job ids"):
        run("queue_retry")
    with pytest.raises(CommandError, match="'abc' is not a whole number"):
        run("queue_retry", "abc")
    assert FailedJob.objects.count() == 1


def test_forget_asks_first(store, workers):
    ids = fail_some(store, 2)
    # No terminal to ask: refuse and change nothing.
    result = workers.command("queue_forget", str(ids[0]))
    assert result.returncode != 0 and "--no-input" in result.stderr
    assert FailedJob.objects.count() == 2
    assert run("queue_forget", str(ids[0]), "--no-input") == "1 failed job forgotten.\n"
    assert run("queue_forget", "--all", "--no-input") == "1 failed job forgotten.\n"
    assert FailedJob.objects.count() == 0


def test_clear_one_queue(store):
    jobs.record.push("a")
    jobs.mail.push("m")
    assert "1 job deleted from queue 'mail'" in run("queue_clear", "--queue", "mail", "--no-input")
    assert store.counts()["default"].waiting == 1
    assert "1 job deleted from every queue" in run("queue_clear", "--no-input")


def test_clear_refuses_an_empty_queue_name(store):
    jobs.record.push("a")
    jobs.mail.push("m")
    # An empty name is no queue, not "every queue".
    with pytest.raises(CommandError, match="--queue ''"):
        run("queue_clear", "--queue", "", "--no-input")
    counts = store.counts()
    assert (counts["default"].waiting, counts["mail"].waiting) == (1, 1)


def test_push_by_name(store):
    text = run("queue_push", "tests.add", "--payload", '{"args": [1, 2], "kwargs": {}}')
    assert text.startswith("Pushed tests.add as job ") and "queue 'default'" in text
    run("queue_push", "tests.record", "--payload", '{"kwargs": {"value": "x"}}',
        "--queue", "mail", "--delay", "60")
    assert store.counts()["mail"].delayed == 1


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["tests.nobody"], "No job is named 'tests.nobody'"),
        (["tests.add", "--payload", "[1]"], "must be a JSON object"),
        (["tests.add", "--payload", "{oops"], "is not valid JSON"),
        (["tests.add", "--payload", '{"args": 3}'], '"args" must be a list'),
        (["tests.add", "--payload", '{"args": [1]}'], "cannot be called with these arguments"),
        (["tests.add", "--delay", "-1"], "'-1' must be 0 or more"),
    ],
)
def test_push_refuses_bad_input(store, args, message):
    with pytest.raises(CommandError, match=None) as e:
        run("queue_push", *args)
    assert message in str(e.value)
    assert all(c.total == 0 for c in store.counts().values())


@pytest.mark.parametrize(
    "args",
    [["--max-jobs", "0"], ["--sleep", "x"], ["--max-seconds", "-3"], ["--batch", "two"]],
)
def test_work_refuses_bad_arguments(store, workers, args):
    result = workers.command("queue_work", *args)
    assert result.returncode != 0 and repr(args[1]) in result.stderr
