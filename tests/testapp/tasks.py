"""The test app's tasks module, imported at start-up as every installed app's is: the
tasks the suite enqueues live in tests/testapp/task_functions.py, imported from here so
that a worker knows them."""

import importlib.util

if importlib.util.find_spec("django.tasks") or importlib.util.find_spec("django_tasks"):
    from tests.testapp import task_functions  # noqa: F401
