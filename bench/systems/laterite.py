"""laterite_django itself, on SQLite, PostgreSQL or Redis: push / push_many; queue_work.

Extra worker arguments (say `--batch 100`) come from $BENCH_LATERITE_ARGS; the
`*_metrics` rows add `--metrics-port 0`; the `*_in_batch` rows push their jobs as one
`batch()` (with a `finally_` callback); the `*_encrypted` rows push a job that encrypts
its argument (`@job(encrypt=True)`, AES-256-GCM); the `*_history` rows keep the job
history (LATERITE_QUEUE_HISTORY, bench/djproject/settings.py). A row
`laterite_pg@<commit>` runs the same code against the package installed from
that commit (see bench/systems/__init__.py).
"""

import os
import shlex
import sys
from pathlib import Path

from bench.systems import ROOT, slug
from bench.systems.base import DB_SUFFIX, pkg_versions
from bench.systems.djangobase import DjangoBase

__all__ = ["System"]


class System(DjangoBase):
    # No laterite store polls: an idle worker is woken by the push (Redis BLPOP,
    # PostgreSQL LISTEN, SQLite inotify), so its latency pushes are spaced as the
    # other push-woken systems' are (20-40 ms), not spread over a poll it does not make.
    poll_interval = 0.0
    # The flow scenario's mode (bench/scenarios.py): "keyed" pushes the keyed job.
    flow = "unlimited"

    def __init__(self, *args):
        super().__init__(*args)
        self.extra = shlex.split(os.environ.get("BENCH_LATERITE_ARGS", ""))
        if self.name.endswith("_metrics"):
            # Prometheus metrics served on a free port: what they cost the drain.
            self.extra += ["--metrics-port", "0"]
        if self.extra:
            self.notes = f"laterite workers ran with: {' '.join(self.extra)}"

    def source(self):
        """Where `laterite_django` is imported from; refuse the wrong tree."""
        import laterite_django

        path = Path(laterite_django.__file__).resolve().parent
        in_tree = path == ROOT / "laterite_django"
        if self.desc.ref and (in_tree or not path.is_relative_to(Path(sys.prefix).resolve())):
            raise RuntimeError(
                f"{self.name} must import laterite_django from its virtualenv, not {path}"
            )
        if not self.desc.ref and not in_tree:
            raise RuntimeError(f"{self.name} must import this tree's laterite_django, not {path}")
        return path

    def versions(self):
        v = pkg_versions("laterite-django", "Django")
        v["laterite source"] = (
            f"commit {self.desc.ref}" if self.desc.ref else os.environ.get("BENCH_TREE", "tree")
        )
        v["laterite path"] = str(self.source())
        if self.desc.store == "Redis":
            v.update(pkg_versions("django-redis", "redis", "hiredis"))
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
                name = f"{slug(self.name)}{DB_SUFFIX}.sqlite3{suffix}"
                (self.run_dir / name).unlink(missing_ok=True)
        if self.desc.store == "Redis":
            self.redis_flush()
        self.setup_django()
        from django.apps import apps

        from bench.laterite_app import jobs

        self.noop = jobs.noop_encrypted if self.name.endswith("_encrypted") else jobs.noop
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
        if self.flow == "keyed":
            from bench.laterite_app.flow_jobs import noop_keyed

            noop_keyed.push_many([(i,) for i in ids])
            return
        if self.flow == "fair":
            from bench.laterite_app.fair_jobs import noop_fair

            noop_fair.push_many([(i,) for i in ids])
            return
        if self.name.endswith("_in_batch"):
            from laterite_django import batch

            batch([self.noop.call(i) for i in ids], finally_=self.noop.call(-1)).push()
            return
        self.noop.push_many([(i,) for i in ids])

    def fill(self, ids, how="head"):
        if how == "failed":
            return self.fill_failed(len(ids))
        import datetime

        options = {
            "head": {},
            "beside": {"queue": "backlog"},  # the workers serve "default" only
            "delayed": {"at": datetime.datetime.now(datetime.UTC) + datetime.timedelta(days=1)},
        }[how]
        for k in range(0, len(ids), self.fill_chunk):
            self.noop.enqueue_many([((i,), {}) for i in ids[k : k + self.fill_chunk]], **options)

    def fill_failed(self, n):
        """n rows of the failed list, written in one INSERT (the database of either store)."""
        from django.db import connection

        if connection.vendor != "postgresql":
            raise NotImplementedError(f"{self.name}: failed rows on {connection.vendor}")
        with connection.cursor() as cursor:
            cursor.execute(
                "INSERT INTO laterite_failed_job (job_id, name, queue, payload, priority,"
                " attempts, pushed_at, failed_at, error, retried_from_error)"
                " SELECT g, 'bench.noop', 'default', '{\"args\": [' || g || '], \"kwargs\": {}}',"
                " 0, 3, now(), now() - g * interval '1 second', 'bench: a failed row', ''"
                " FROM generate_series(1, %s) g",
                [n],
            )

    def clear(self):
        from laterite_django.stores import get_store

        get_store().clear()  # what `queue_clear` does

    def worker_commands(self, n):
        return [self.manage("queue_work", "--queue", "default", "--processes", str(n), *self.extra)]
