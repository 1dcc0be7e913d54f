"""The app config: find every installed app's jobs module at start-up; in the `worker`
mode, start the worker threads when the process serves its first request."""

from __future__ import annotations

from typing import Any

from django.apps import AppConfig
from django.core.signals import request_started, setting_changed
from django.utils.module_loading import autodiscover_modules

from . import context, inline, jobs
from .calls import link_job
from .flow.limits import limits_of
from .schedules import tasks as scheduled_tasks
from .stores import callbacks, on_setting_changed
from .tasks import runner as task_runner
from .worker.execute import run_here
from .worker.serving import on_request_started
from .worker.threads import ensure_started
from .workflows.batches import add_to_batch


def resolve_task(path: str) -> Any:
    """The Task at module path `path` (tasks.results.resolve_task)."""
    # Optional dependency: Django's Tasks framework (django.tasks, or the django_tasks
    # backport), which tasks.results imports.
    from .tasks.results import resolve_task

    return resolve_task(path)


class LateriteConfig(AppConfig):
    name = "laterite_django"
    label = "laterite_django"
    verbose_name = "Background jobs"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Registers the system checks as it is imported; it imports the models, so it is
        # imported here, once they are loaded.
        from . import checks  # noqa: F401

        # The layers below call up through these: the inline mode runs a job as the worker
        # would, a running job adds calls to its batch, a push in the `worker` mode starts
        # the worker threads; the stores make the job of a workflow's link, find the
        # concurrency limit of a job stored again, and read the limits of a claim whose
        # caller passed none.
        inline.set_runner(run_here)
        context.set_batch_adder(add_to_batch)
        jobs.set_thread_starter(ensure_started)
        scheduled_tasks.set_task_resolver(resolve_task)
        callbacks.set_link_maker(link_job)
        callbacks.set_limit_finder(jobs.limit_of_payload)
        callbacks.set_fair_finder(jobs.fair_of_payload)
        callbacks.set_limits_source(limits_of)
        setting_changed.connect(on_setting_changed, dispatch_uid="laterite_reset_store")
        # The `worker` mode: a process that serves requests runs its worker threads.
        request_started.connect(on_request_started, dispatch_uid="laterite_worker_threads")
        # As the admin does with admin.py: import each installed app's jobs module.
        autodiscover_modules("jobs")
        # Django's Tasks framework: when TASKS names LateriteBackend, the worker
        # needs the job that runs tasks.
        task_runner.register_if_configured()
        # Schedules of tasks: every worker needs the job that enqueues them.
        scheduled_tasks.register_if_configured()
