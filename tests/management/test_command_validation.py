"""What queue_push and queue_work refuse or warn about before they touch the store."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from laterite_django.models import Job


def push(*args: str) -> tuple[str, str]:
    out, err = StringIO(), StringIO()
    call_command("queue_push", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def test_push_to_a_queue_no_worker_takes_from_warns_and_pushes(store):
    out, err = push("tests.add", "--payload", '{"args": [1, 2]}', "--queue", "nosuchqueue")
    assert "Pushed tests.add" in out and "queue 'nosuchqueue'" in out
    assert "Warning" in err and "'nosuchqueue'" in err
    assert "['default', 'mail', 'low']" in err and "queue_work --queue nosuchqueue" in err
    assert store.counts()["nosuchqueue"].waiting == 1


def test_push_to_a_listed_queue_does_not_warn(store):
    out, err = push("tests.add", "--payload", '{"args": [1, 2]}', "--queue", "mail")
    assert "Pushed tests.add" in out and err == ""


def test_push_reports_every_argument_problem(store):
    with pytest.raises(CommandError) as e:
        push("tests.add", "--payload", json.dumps({"kwargs": {"y": 1}}))
    text = str(e.value)
    assert "missing 'a', 'b'" in text and "unexpected 'y'" in text
    assert all(c.total == 0 for c in store.counts().values())


def test_push_refuses_a_queue_longer_than_its_column(store):
    with pytest.raises(CommandError, match=r"101 characters.*100"):
        push("tests.add", "--payload", '{"args": [1, 2]}', "--queue", "q" * 101)
    with pytest.raises(CommandError, match="queue must be a non-empty string"):
        push("tests.add", "--payload", '{"args": [1, 2]}', "--queue", "")
    assert all(c.total == 0 for c in store.counts().values())


@pytest.mark.parametrize("value", ["0", "0.0", "-1"])
def test_work_refuses_a_sleep_of_zero(store, workers, value):
    result = workers.command("queue_work", "--sleep", value, "--stop-when-empty")
    assert result.returncode != 0
    assert f"--sleep: {value!r} must be more than 0" in result.stderr


def test_work_refuses_a_name_longer_than_claimed_by(store, workers):
    # claimed_by holds 200 characters; the supervisor adds "-<slot>" or ":supervisor".
    result = workers.command("queue_work", "--name", "w" * 181, "--stop-when-empty")
    assert result.returncode != 0
    assert "--name: 'wwwww" in result.stderr and "181 characters" in result.stderr
    assert "180" in result.stderr
    assert not Job.objects.exists()
