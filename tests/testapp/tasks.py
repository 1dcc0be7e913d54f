"""The test app's tasks module, imported at start-up as every installed app's is: the
tasks the suite enqueues live in tests/testapp/task_functions.py, imported from here so
that a worker knows them."""

import importlib.util
import os

if importlib.util.find_spec("django.tasks") or importlib.util.find_spec("django_tasks"):
    from tests.testapp import task_functions  # noqa: F401

    if os.environ.get("LATERITE_TEST_FLOW_TASKS"):
        # Limited tasks make every claim the limited one: only the workers of the task
        # limit tests import them (tests/tasks/test_task_limits.py).
        from tests.testapp import flow_tasks  # noqa: F401
