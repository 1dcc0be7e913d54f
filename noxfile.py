"""The test matrix: Django 5.2 LTS on Python 3.11 and Django 6.x on Python 3.12, each on
SQLite and PostgreSQL (Redis-store tests run in both), plus lint and migration checks."""

from __future__ import annotations

import os

import nox

nox.options.sessions = ["lint", "tests"]
nox.options.reuse_existing_virtualenvs = True
nox.options.error_on_missing_interpreters = True

MATRIX = [
    # (python, Django requirement, extra packages for that Django)
    ("3.11", "django>=5.2,<5.3", ["django-tasks>=0.12"]),
    ("3.12", "django>=6.0,<6.2", []),
]


@nox.session(python=["3.11"])
def lint(session: nox.Session) -> None:
    """ruff, `manage.py check` and a missing-migration check."""
    session.install("-e", ".[test]", "django>=5.2,<5.3")
    session.run("ruff", "check", ".")
    env = {"DJANGO_SETTINGS_MODULE": "tests.settings", "PYTHONPATH": "."}
    session.run("python", "-m", "django", "check", "--fail-level", "WARNING", env=env)
    session.run("python", "-m", "django", "makemigrations", "--check", "--dry-run", env=env)
    session.run("python", "example_project/manage.py", "check", "--fail-level", "WARNING")


@nox.session
@nox.parametrize(
    ("python", "django", "extras"),
    [nox.param(py, dj, ex, id=f"py{py}-{dj.split(',')[0].removeprefix('django>=')}")
     for py, dj, ex in MATRIX],
)
def tests(session: nox.Session, django: str, extras: list[str]) -> None:
    """The whole suite on SQLite, then on PostgreSQL."""
    session.install("-e", ".[test]", django, *extras)
    databases = os.environ.get("LATERITE_TEST_DBS", "sqlite,postgres").split(",")
    work = f"/tmp/laterite-nox-{session.python}"
    for db in databases:
        session.run(
            "pytest",
            *session.posargs,
            env={
                "LATERITE_TEST_DB": db,
                "LATERITE_SQLITE_FILE": f"{work}/test.sqlite3",
                "LATERITE_PG_TEST_NAME": f"test_laterite_py{session.python.replace('.', '')}",
            },
        )
