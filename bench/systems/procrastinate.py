"""Procrastinate: sync defer / batch_defer through the app; `procrastinate worker` CLI."""

import sys

from bench.systems.base import Base, pkg_versions

__all__ = ["System"]


class System(Base):
    def versions(self):
        return {**pkg_versions("procrastinate", "psycopg"), "postgresql": self.pg_server_version()}

    def setup(self):
        import os

        os.environ["BENCH_PG_DSN"] = self.dsn
        self.pg_create_database()
        from bench.systems import procrastinate_jobs as jobs

        self.jobs = jobs
        self.app = jobs.app
        self.app.open()
        self.app.schema_manager.apply_schema()

    def reset(self):
        # Jobs and, by CASCADE, their events; never procrastinate_workers: a
        # running worker's row must stay (reset also runs under live workers).
        self.pg_truncate("procrastinate_jobs")

    def teardown(self):
        self.app.close()
        self.pg_drop_database()

    def push_one(self, i):
        self.jobs.noop.defer(i=i)

    def push_bulk(self, ids):
        self.jobs.noop.batch_defer(*[{"i": i} for i in ids])

    def worker_commands(self, n):
        argv = [
            sys.executable,
            "-m",
            "procrastinate",
            "--app=bench.systems.procrastinate_jobs.app",
            "worker",
            "--concurrency",
            "1",
        ]
        return [argv] * n
