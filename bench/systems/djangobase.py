"""Shared set-up for the systems that live in the bench's Django project."""

import os
import sys

from bench.systems.base import Base

__all__ = ["DjangoBase"]

SETTINGS = "bench.djproject.settings"


class DjangoBase(Base):
    def setup_django(self):
        """Make the database, configure Django in this process and migrate."""
        os.environ.update(self.worker_env())
        if self.uses_pg:
            self.pg_create_database()
        import django
        from django.core.management import call_command

        django.setup()
        call_command("migrate", verbosity=0, interactive=False)

    def manage(self, *args):
        return [sys.executable, "-m", "django", *args, "--settings", SETTINGS]

    @property
    def uses_pg(self):
        """Whether the Django database is PostgreSQL (Redis systems keep their tables there)."""
        return self.desc.store != "SQLite"

    workers = 1  # set by worker_commands(n): some settings need the count

    def worker_env(self):
        env = super().worker_env()
        env.update(DJANGO_SETTINGS_MODULE=SETTINGS, BENCH_WORKERS=str(self.workers))
        return env

    def truncate_models(self, *models):
        from django.db import connection

        tables = ", ".join(connection.ops.quote_name(m._meta.db_table) for m in models)
        with connection.cursor() as cursor:
            if connection.vendor == "postgresql":
                cursor.execute(f"TRUNCATE {tables} RESTART IDENTITY CASCADE")
            else:
                for m in models:
                    cursor.execute(f"DELETE FROM {connection.ops.quote_name(m._meta.db_table)}")

    def teardown(self):
        from django.db import connections

        connections.close_all()
        if self.uses_pg:
            self.pg_drop_database()
