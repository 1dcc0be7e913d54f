"""django-tasks-db: Task.enqueue() on the database backend; `db_worker` processes."""

from bench.systems.base import pkg_versions
from bench.systems.djangobase import DjangoBase

__all__ = ["System"]


class System(DjangoBase):
    has_bulk = False  # no bulk enqueue in django-tasks: a loop of enqueue()

    def __init__(self, *args):
        super().__init__(*args)
        self.tuned = self.name.endswith("_tuned")
        self.poll_interval = 0.1 if self.tuned else 1.0
        if self.tuned:
            self.notes = "django-tasks-db tuned: CONN_MAX_AGE=None, db_worker --interval 0.1."
        else:
            self.notes = (
                "django-tasks-db as shipped: db_worker polls every 1 s when idle,"
                " CONN_MAX_AGE=0 (a new connection per loop)."
            )

    def versions(self):
        return {
            **pkg_versions("django-tasks-db", "django-tasks", "Django", "psycopg"),
            "postgresql": self.pg_server_version(),
        }

    def setup(self):
        self.setup_django()
        from django_tasks_db.models import DBTaskResult

        from bench.systems.dtasks_jobs import noop

        self.model = DBTaskResult
        self.noop = noop

    def reset(self):
        self.truncate_models(self.model)

    def push_one(self, i):
        self.noop.enqueue(i)

    def worker_commands(self, n):
        argv = self.manage("db_worker", "--queue-name", "default")
        if self.tuned:
            argv += ["--interval", "0.1"]
        return [argv] * n
