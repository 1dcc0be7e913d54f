"""The queue_* management commands, on every store."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from django.db import connection

from laterite_django.models import FailedJob
from tests.conftest import ROOT
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
                            "paused": False, "pending": 1, "reserved": 0, "running_jobs": [],
                            "fair_keys": None, "held_sequences": []}
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


def test_status_shows_every_configured_queue_at_zero(store):
    text = run("queue_status")
    assert "(no jobs)" not in text
    rows = [line.split() for line in text.splitlines()[1:-1]]
    # LATERITE_QUEUE_QUEUES, in its order, at zero.
    assert rows == [[queue, "0", "0", "0", "0"] for queue in ["default", "mail", "low"]]
    jobs.record.enqueue(["x"], {}, queue="elsewhere")
    rows = [line.split() for line in run("queue_status").splitlines()[1:-1]]
    assert [row[0] for row in rows] == ["default", "mail", "low", "elsewhere"]
    assert rows[-1] == ["elsewhere", "1", "0", "0", "0"]
    data = json.loads(run("queue_status", "--json"))
    assert list(data) == ["default", "mail", "low", "elsewhere"]
    assert data["low"]["waiting"] == 0 and data["elsewhere"]["waiting"] == 1


def test_failed_cuts_a_long_error_at_a_word(store):
    jobs.record.push("a")
    claim = store.claim(["default"], "w")[0]
    words = "RuntimeError: " + " ".join(["abcdefghij"] * 20)
    store.fail(claim, f"{words}\n\ntraceback")
    row = run("queue_failed").splitlines()[1]
    shown = row[row.index("RuntimeError"):]
    assert shown.endswith("abcdefghij…") and len(shown) <= 100
    assert words.startswith(shown[:-1])
    # The whole error is in --json.
    assert json.loads(run("queue_failed", "--json"))[0]["error"].startswith(words)


def test_retry_by_id_and_all(store):
    ids = fail_some(store, 3)
    assert run("queue_retry", str(ids[0])) == "1 job put back on its queue.\n"
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


# -- a store not migrated, or down: one line, exit 1 -------------------------------------


def command(workers, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    """Run `manage.py ARGS` in a subprocess with `env` over the test environment."""
    return subprocess.run(
        [sys.executable, "-m", "django", *args], cwd=ROOT, env=workers.env(**env),
        capture_output=True, text=True, timeout=60,
    )


PUSH = ("import django; django.setup()\n"
        "from laterite_django.exceptions import StoreUnavailable\n"
        "from tests.testapp.jobs import add\n"
        "try:\n"
        "    add.push(1, 2)\n"
        "except StoreUnavailable as e:\n"
        "    print(type(e).__name__, e, sep=': ')\n")


def push_in_subprocess(workers, env: dict[str, str]) -> str:
    """Push a job from a script; return what it printed of the StoreUnavailable raised."""
    result = subprocess.run([sys.executable, "-c", PUSH], cwd=ROOT, env=workers.env(**env),
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0 and result.stderr == "", result.stderr
    return result.stdout


@pytest.fixture
def unmigrated(transactional_db) -> Iterator[dict[str, str]]:
    """The environment of a project whose database has no laterite tables (no tables at
    all: `migrate` never ran), on the test database's engine."""
    name = f"{connection.settings_dict['NAME']}_unmigrated"
    if connection.vendor == "sqlite":
        name = str(connection.settings_dict["NAME"]).replace(".sqlite3", "-unmigrated.sqlite3")
        Path(name).unlink(missing_ok=True)
        yield {"LATERITE_TEST_DB_NAME": name}
        Path(name).unlink(missing_ok=True)
        return
    import psycopg

    data = connection.settings_dict
    dsn = f"host={data['HOST']} port={data['PORT']} user={data['USER']} dbname=postgres"
    with psycopg.connect(dsn, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield {"LATERITE_TEST_DB_NAME": name}
    finally:
        with psycopg.connect(dsn, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


BEFORE_MIGRATE = [
    ["queue_work", "--stop-when-empty"],
    ["queue_work", "--processes", "2"],
    ["queue_push", "tests.add", "--payload", '{"args": [1, 2]}'],
    ["queue_status"],
    ["queue_failed"],
    ["queue_retry", "--all"],
    ["queue_forget", "--all", "--no-input"],
    ["queue_clear", "--no-input"],
    ["queue_prune_results"],
    ["queue_batches"],
    ["queue_batches", "--cancel", "1", "--no-input"],
]


@pytest.mark.parametrize("args", BEFORE_MIGRATE, ids=" ".join)
def test_before_migrate_every_command_says_to_run_migrate(workers, store_kind, unmigrated,
                                                          args):
    if store_kind != "database" and args[0] in ("queue_push", "queue_clear"):
        pytest.skip("the Redis store keeps its jobs in Redis: these need no table")
    result = command(workers, *args, env=unmigrated)
    assert result.returncode == 1, result.stderr
    # One line (tests/settings.py logs laterite's warnings and errors only).
    assert result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith("CommandError: ")
    assert "run `python manage.py migrate`" in result.stderr
    assert "starting another" not in result.stderr and "Traceback" not in result.stderr


def test_before_migrate_push_raises_store_not_migrated(workers, store_kind, unmigrated):
    if store_kind != "database":
        pytest.skip("the Redis store keeps its jobs in Redis: a push needs no table")
    printed = push_in_subprocess(workers, unmigrated)
    assert printed.startswith("StoreNotMigrated: ") and printed.count("\n") == 1
    assert "run `python manage.py migrate`" in printed


def test_queue_work_refuses_a_database_short_of_a_migration(workers, store_kind, unmigrated):
    migrate = command(workers, "migrate", "laterite_django", "0002", "-v", "0", env=unmigrated)
    assert migrate.returncode == 0, migrate.stderr
    result = command(workers, "queue_work", "--stop-when-empty", env=unmigrated)
    assert result.returncode == 1 and result.stderr.count("\n") == 1, result.stderr
    assert "0003_claim_position_and_token, 0004_outbox" in result.stderr
    assert "run `python manage.py migrate`" in result.stderr


def store_down(store_kind: str) -> tuple[dict[str, str], str]:
    """The environment of a store that cannot be reached, and its address."""
    if store_kind != "database":
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        if store_kind == "redis_cluster":  # its six nodes from there: none answers
            return {"LATERITE_TEST_CLUSTER_PORT": str(port)}, f"127.0.0.1:{port}"
        return {"LATERITE_REDIS_URL": f"redis://127.0.0.1:{port}/0"}, f"127.0.0.1:{port}"
    if connection.vendor == "postgresql":
        return {"LATERITE_PG_PORT": "1"}, "127.0.0.1:1"
    path = "/nonexistent-laterite-dir/db.sqlite3"
    return {"LATERITE_TEST_DB_NAME": path}, path


@pytest.mark.parametrize(
    "args",
    [["queue_push", "tests.add", "--payload", '{"args": [1, 2]}'], ["queue_status"],
     ["queue_clear", "--no-input"]],
    ids=lambda args: args[0],
)
def test_a_store_that_is_down_is_one_line_naming_it(workers, store_kind, args):
    env, address = store_down(store_kind)
    result = command(workers, *args, env=env)
    assert result.returncode == 1, result.stderr
    assert result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith("CommandError: ")
    assert "cannot be reached" in result.stderr and address in result.stderr
    assert f"The {store_kind.removesuffix('_cluster')} store" in result.stderr


def test_push_to_a_store_that_is_down_raises_store_unavailable(workers, store_kind):
    env, address = store_down(store_kind)
    printed = push_in_subprocess(workers, env)
    assert printed.startswith("StoreUnavailable: ") and printed.count("\n") == 1
    assert address in printed


@pytest.mark.parametrize("name", ["queue_work", "queue_status", "queue_retry"])
def test_version_is_laterites(name):
    """`--version` names laterite's version, not Django's."""
    from laterite_django.management.console import version

    out = subprocess.run([sys.executable, "-m", "django", name, "--version"], cwd=ROOT,
                         env={**os.environ, "DJANGO_SETTINGS_MODULE": "tests.settings",
                              "PYTHONPATH": str(ROOT)},
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == version()
