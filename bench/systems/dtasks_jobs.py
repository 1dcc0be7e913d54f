"""The django-tasks task, imported by path in db_worker."""

from django_tasks import task

from bench.systems._record import record

__all__ = ["noop"]


@task()
def noop(i):
    record(i)
