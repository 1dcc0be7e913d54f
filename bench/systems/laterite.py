"""laterite_django itself, on SQLite, PostgreSQL or Redis: push / push_many; queue_work.

Extra worker arguments (say `--batch 100`) come from $BENCH_LATERITE_ARGS.
"""

import os
import shlex

from bench.systems.base import pkg_versions
from bench.systems.djangobase import DjangoBase

__all__ = ["System"]


class System(DjangoBase):
    poll_interval = 1.0  # LATERITE_QUEUE_POLL's default, in case a store polls

    def __init__(self, *args):
        super().__init__(*args)
        self.extra = shlex.split(os.environ.get("BENCH_LATERITE_ARGS", ""))
        if self.extra:
            self.notes = f"laterite workers ran with: {' '.join(self.extra)}"

    def versions(self):
        v = pkg_versions("laterite-django", "Django")
        if self.desc.store == "Redis":
            v.update(pkg_versions("django-redis", "redis"))
            v["redis-server"] = self.redis_server_version()
        elif self.desc.store == "PostgreSQL":
            v.update(pkg_versions("psycopg"))
            v["postgresql"] = self.pg_server_version()
        else:
            import sqlite3

            v["sqlite"] = sqlite3.sqlite_version
        return v

    def setup(self):
        if self.desc.store == "SQLite":
            for suffix in ("", "-wal", "-shm"):
                (self.run_dir / f"{self.name}.sqlite3{suffix}").unlink(missing_ok=True)
        if self.desc.store == "Redis":
            self.redis_flush()
        self.setup_django()
        from django.apps import apps

        from bench.laterite_app.jobs import noop

        self.noop = noop
        # Every table of laterite's (jobs, failed jobs, results, ...).
        self.models = list(apps.get_app_config("laterite_django").get_models())

    def reset(self):
        self.truncate_models(*self.models)
        if self.desc.store == "Redis":
            self.redis_flush()

    def teardown(self):
        super().teardown()
        if self.desc.store == "Redis":
            self.redis_flush()

    def push_one(self, i):
        self.noop.push(i)

    def push_bulk(self, ids):
        self.noop.push_many([(i,) for i in ids])

    def worker_commands(self, n):
        return [self.manage("queue_work", "--queue", "default", "--processes", str(n), *self.extra)]
