"""A task path in a payload is data anyone who can write to the store can choose: the
worker resolves it only to a Task in a module already imported (an installed app's
`tasks` module, imported at start-up, or what it imports), and imports nothing itself."""

from __future__ import annotations

import sys

import pytest

pytest.importorskip(
    "laterite_django.tasks.compat",
    reason="needs Django's Tasks framework: Django 6+, or the django-tasks backport",
    exc_type=ImportError,
)

from laterite_django.models import FailedJob
from laterite_django.tasks.results import UnknownTask, resolve_task
from laterite_django.tasks.runner import TASK_JOB, task_job
from tests.testapp import task_functions as tasks
from tests.testapp.models import Record
from tests.testapp.task_functions import __name__ as TASKS_MODULE

SIDE_EFFECT = "tests.import_side_effect"


@pytest.fixture
def marker(tmp_path, monkeypatch):
    """The file tests/import_side_effect.py writes if anything imports it."""
    path = tmp_path / "imported"
    monkeypatch.setenv("LATERITE_TEST_IMPORT_MARKER", str(path))
    assert SIDE_EFFECT not in sys.modules
    yield path
    sys.modules.pop(SIDE_EFFECT, None)


def test_a_known_task_resolves():
    assert resolve_task(f"{TASKS_MODULE}.add") is tasks.add


def test_a_module_not_imported_is_refused_without_importing_it(marker):
    with pytest.raises(UnknownTask) as e:
        resolve_task(f"{SIDE_EFFECT}.task")
    text = str(e.value)
    assert f"'{SIDE_EFFECT}.task'" in text and "not imported" in text and "tasks" in text
    assert not marker.exists()
    assert SIDE_EFFECT not in sys.modules


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("os.system", "'os.system' is builtin_function_or_method, not a Task"),
        (f"{TASKS_MODULE}.nothing_here", "has no 'nothing_here'"),
        (f"{TASKS_MODULE}.TASK_OPTIONS", "is bool, not a Task"),
        ("nosuchpackage.tasks.add", "not imported"),
        ("add", "not a module path"),
        ("", "not a module path"),
        (".add", "not a module path"),
        (5, "not a module path"),
    ],
)
def test_what_is_not_a_known_task_is_refused(path, message):
    with pytest.raises(UnknownTask) as e:
        resolve_task(path)
    assert message in str(e.value)
    assert "nosuchpackage" not in sys.modules


def test_a_lazy_module_attribute_is_not_loaded():
    # laterite_django.tasks loads LateriteBackend on attribute access (PEP 562):
    # resolution reads what the module holds and runs none of its code.
    module = sys.modules["laterite_django.tasks"]
    module.__dict__.pop("LateriteTask", None)
    with pytest.raises(UnknownTask, match="has no 'LateriteTask'"):
        resolve_task("laterite_django.tasks.LateriteTask")


def test_the_worker_fails_a_task_it_does_not_know_and_imports_nothing(workers, marker):
    touched = marker.parent / "touched"
    task_job().push(task=f"{SIDE_EFFECT}.task", args=[], kwargs={})
    task_job().push(task="os.system", args=[f"touch {touched}"], kwargs={})
    task_job().push(task=f"{TASKS_MODULE}.record", args=["known"], kwargs={})
    result = workers.run("--stop-when-empty", env={"LATERITE_TEST_IMPORT_MARKER": str(marker)})
    assert result.returncode == 0, result.stderr
    errors = sorted(FailedJob.objects.filter(name=TASK_JOB).values_list("error", flat=True))
    assert len(errors) == 2
    assert f"cannot run task '{SIDE_EFFECT}.task'" in errors[1]
    assert "UnknownTask" in errors[1] and "not imported" in errors[1]
    assert "cannot run task 'os.system'" in errors[0] and "not a Task" in errors[0]
    assert not marker.exists() and not touched.exists()
    # The task of an installed app's tasks module (tests/testapp/tasks.py imports it) ran.
    assert Record.objects.filter(kind="task", value="known").exists()
