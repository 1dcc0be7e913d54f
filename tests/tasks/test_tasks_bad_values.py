"""What a task's enqueue refuses on every store, as a job's push does: a NUL or a lone
surrogate in its queue name or its arguments (kept in a JSON column: PostgreSQL's
jsonb has no NUL)."""

from __future__ import annotations

import pytest

pytest.importorskip(
    "laterite_django.tasks.compat",
    reason="needs Django's Tasks framework: Django 6+, or the django-tasks backport",
    exc_type=ImportError,
)

from django.test import override_settings

from laterite_django.exceptions import InvalidPayload
from laterite_django.models import TaskResultRecord
from laterite_django.tasks.compat import InvalidTask
from tests.testapp import task_functions as tasks


@pytest.mark.parametrize(("value", "what"), [
    ("a\0b", "a NUL character"),
    (["x", "a\ud800"], "a lone surrogate '\\ud800'"),
])
def test_a_task_argument_with_a_nul_or_lone_surrogate_is_refused(store, value, what):
    with pytest.raises(InvalidPayload) as e:
        tasks.echo.enqueue(value)
    text = str(e.value)
    assert text.startswith(f"Task '{tasks.__name__}.echo': positional argument 0 "), text
    assert what in text
    assert not TaskResultRecord.objects.exists()
    assert all(c.total == 0 for c in store.counts().values())


def test_a_task_queue_name_with_a_nul_is_invalid():
    setting = {"default": {"BACKEND": "laterite_django.tasks.LateriteBackend", "QUEUES": []}}
    with override_settings(TASKS=setting), pytest.raises(InvalidTask) as e:
        tasks.noop.using(queue_name="mail\0")
    assert str(e.value) == (f"Task '{tasks.__name__}.noop': queue_name 'mail\\x00' holds a "
                            f"NUL character at position 4, which no store can keep.")
