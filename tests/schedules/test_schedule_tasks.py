"""A task of Django's Tasks framework on a schedule: `{"task": "module.path", ...}`."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.test import override_settings

from laterite_django.checks import check_schedules
from laterite_django.schedules.definition import schedules
from laterite_django.schedules.scheduler import Scheduler
from laterite_django.schedules.tasks import SCHEDULED_TASK
from laterite_django.testing import run_jobs
from tests.schedules.test_store_schedules import Clock
from tests.testapp.models import Record

pytest.importorskip("laterite_django.tasks.compat", exc_type=ImportError)

RECORD = "tests.testapp.task_functions.record"


def test_a_scheduled_task_is_enqueued_through_its_backend_at_each_tick(store):
    with override_settings(LATERITE_QUEUE_SCHEDULES={
            "task-beat": {"task": RECORD, "every": 1, "args": ["from-schedule"]}}):
        (schedule,) = schedules()
        assert schedule.job == SCHEDULED_TASK and schedule.target == RECORD
        clock = Clock(datetime(2026, 6, 1, 12, tzinfo=UTC))
        scheduler = Scheduler(store=store, clock=clock)
        scheduler.step()
        clock.advance(2)
        scheduler.step()
        # The two ticks' jobs enqueue the task twice, then the two tasks run.
        assert run_jobs() == 4
    values = list(Record.objects.filter(kind="task").values_list("value", flat=True))
    assert values == ["from-schedule", "from-schedule"]


@pytest.mark.parametrize(("definition", "code", "text"), [
    ({"task": "tests.testapp.task_functions.nope", "every": 1}, "laterite.E021", "has no 'nope'"),
    ({"task": RECORD, "job": "tests.noop", "every": 1, "args": ["x"]}, "laterite.E021",
     "both job and task"),
    ({"task": RECORD, "every": 1}, "laterite.E024", "cannot be called"),
    ({"task": RECORD, "every": 1, "args": [object()]}, "laterite.E024", "cannot be stored"),
])
def test_bad_task_schedules_are_errors_naming_them(definition, code, text):
    with override_settings(LATERITE_QUEUE_SCHEDULES={"t": definition}):
        messages = check_schedules()
    assert [m.id for m in messages] == [code]
    assert messages[0].msg.startswith("Schedule 't': ") and text in messages[0].msg
