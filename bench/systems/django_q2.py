"""django-q2 with the ORM broker on PostgreSQL: async_task(); one qcluster with n workers."""

from bench.systems.base import pkg_versions
from bench.systems.djangobase import DjangoBase

__all__ = ["System"]

FUNC = "bench.systems._record.noop"


class System(DjangoBase):
    has_bulk = False  # no bulk push in django-q2: a loop of async_task()
    poll_interval = 0.2  # the ORM broker's default poll

    def __init__(self, *args):
        super().__init__(*args)
        if self.name.endswith("_tuned"):
            self.notes = "django-q2 tuned: CONN_MAX_AGE=None, otherwise as shipped."
        else:
            self.notes = (
                "django-q2 as shipped: the ORM broker polls every 0.2 s, CONN_MAX_AGE=0"
                " (a new connection per push and per poll), results saved."
            )

    def versions(self):
        return {
            **pkg_versions("django-q2", "Django", "psycopg"),
            "postgresql": self.pg_server_version(),
        }

    def setup(self):
        self.setup_django()
        from django_q.models import OrmQ, Task
        from django_q.tasks import async_task

        self.models = (OrmQ, Task)
        self.async_task = async_task

    def reset(self):
        self.truncate_models(*self.models)

    def push_one(self, i):
        self.async_task(FUNC, i)

    def worker_commands(self, n):
        self.workers = n  # Q_CLUSTER["workers"]: one cluster with n worker processes
        return [self.manage("qcluster")]
