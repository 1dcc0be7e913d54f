"""The test matrix: Django 5.2 LTS on Python 3.11 on SQLite and PostgreSQL, Django 6.x on
Python 3.12 on PostgreSQL, each store's tests on both databases, plus lint, type and
migration checks, the manual, the package (sdist and wheel built, `twine check`, the
wheel's demo in a new virtualenv) and the example project's own tests on each of its
stores, on both Djangos.

The suite runs as six legs, three at a time (LEGS: which tests, on which Django,
database and store; the sixth, the store suite on a Redis Cluster), so that each test
runs once where it says most and the run fits in about half an hour. The whole
matrix at full length, both stores on every Django and database, is one command:
`LATERITE_TEST_FULL=1 LATERITE_TEST_DBS=sqlite,postgres nox`.

Each leg keeps its SQLite file and its log in `$LATERITE_NOX_TMP/<leg>` (default
/tmp/laterite-nox): give each of two runs on one machine its own folder (and its own
LATERITE_PG_TEST_PREFIX), or they overwrite each other's files."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from pathlib import Path
from typing import IO, NamedTuple

import nox


def _let_pyenv_answer(minors: list[str]) -> None:
    """Under pyenv, make the `pythonX.Y` shims of the matrix answer: a shim refuses a
    version that PYENV_VERSION (or `pyenv global`) does not name, so nox would find no
    Python 3.12. Each missing minor is added as the newest pyenv version installed for
    it; an interpreter that already answers is left as it is."""
    pyenv = shutil.which("pyenv")
    if not pyenv:
        return
    def answers(minor: str) -> bool:
        found = shutil.which(f"python{minor}")
        return bool(found) and subprocess.run(
            [found, "--version"], capture_output=True, check=False).returncode == 0
    missing = [minor for minor in minors if not answers(minor)]
    if not missing:
        return
    installed = subprocess.run([pyenv, "versions", "--bare"], capture_output=True,
                               text=True, check=False).stdout.split()
    named = [v for v in os.environ.get("PYENV_VERSION", "").split(":") if v]
    if not named:
        named = subprocess.run([pyenv, "version-name"], capture_output=True, text=True,
                               check=False).stdout.strip().split(":")
    for minor in missing:
        versions = sorted((v for v in installed if re.fullmatch(rf"{re.escape(minor)}\.\d+", v)),
                          key=lambda v: int(v.rsplit(".", 1)[1]))
        if versions:
            named.append(versions[-1])
    os.environ["PYENV_VERSION"] = ":".join(v for v in named if v)


nox.options.sessions = ["lint", "docs", "package", "example", "tests"]
nox.options.reuse_existing_virtualenvs = True
nox.options.error_on_missing_interpreters = True

MATRIX = [
    # (python, Django requirement, extra packages for that Django, session id)
    ("3.11", "django>=5.2,<5.3", ["django-tasks>=0.12"], "django5.2"),
    ("3.12", "django>=6.0,<7", [], "django6"),
]
_let_pyenv_answer(sorted({py for py, *_ in MATRIX}))



class Leg(NamedTuple):
    """One pytest run of the suite: a Django (MATRIX's id) on a database, the stores the
    store-level tests run on (LATERITE_TEST_STORES), the tests taken by marker (None:
    all), and whether only the store-level tests run (the others ran in a leg beside)."""

    django: str
    database: str
    stores: str
    markers: str | None = None
    store_tests_only: bool = False
    # The tests it runs (pytest's arguments; none: the whole suite).
    paths: tuple[str, ...] = ()

    @property
    def id(self) -> str:
        """The leg's name: its folder under LATERITE_NOX_TMP and its PostgreSQL database."""
        parts = [self.django, self.database]
        if self.stores in ("redis", "redis_cluster"):
            parts.append(self.stores)
        if self.markers == "slow":
            parts.append("slow")
        return "-".join(parts)


# Longest first (each took 10-25 minutes on 2 cores), three at a time. The slow tests
# (worker processes run for a while, chaos, many hosts) exercise the queue, not
# Django: they run on Django 5.2, on both databases; the others on SQLite with Django
# 5.2 and on PostgreSQL with Django 6, where those of Django's own servers run again.
# Each store's tests run on both databases: the database store's everywhere, the Redis
# store's (its failed list and outbox in the database) on PostgreSQL with Django 6 and,
# the slow ones, on SQLite.
LEGS = [
    Leg("django5.2", "sqlite", "database"),
    Leg("django6", "postgres", "database", "not slow or servers"),
    Leg("django6", "postgres", "redis", "not slow or servers", store_tests_only=True),
    Leg("django5.2", "postgres", "database", "slow"),
    Leg("django5.2", "sqlite", "redis", "slow", store_tests_only=True),
    # The store suite on a Redis Cluster the leg starts (about a minute).
    Leg("django5.2", "sqlite", "redis_cluster", "not slow", store_tests_only=True,
        paths=("tests/stores", "--ignore=tests/stores/database")),
]
# Legs run at a time: a leg keeps about half a core busy (most of its time goes in
# waiting on worker processes), so three share two cores.
SLOTS = int(os.environ.get("LATERITE_TEST_SLOTS", "3"))
# LATERITE_TEST_FULL=1: every test on both stores, one leg per Django and database.
FULL_DATABASES = {"django5.2": "sqlite,postgres", "django6": "postgres"}


# The PostgreSQL databases the tests create are named from this prefix and the leg
# (test_laterite_django6_postgres, test_laterite_django6_postgres_redis, ...), the
# example's test_laterite_example_py311.
# LATERITE_PG_TEST_PREFIX chooses another, so that two clones can share one server.
PG_TEST_PREFIX = os.environ.get("LATERITE_PG_TEST_PREFIX", "test_laterite")
# The legs' SQLite files and logs go under this folder, one subfolder per leg.
NOX_TMP = Path(os.environ.get("LATERITE_NOX_TMP", "/tmp/laterite-nox"))
# The tests that need a Redis Cluster start one of six nodes (tests/conftest.py's
# `redis_cluster`, and a failover test one more from 10 ports further); each leg's on
# ports of its own from here, twenty apart.
CLUSTER_PORT = int(os.environ.get("LATERITE_TEST_CLUSTER_PORT", "7400"))


# mypy checks against Django 5.2, with the django_tasks backport that serves tasks there;
# django-stubs' version follows Django's, and each release names the mypy it supports.
TYPECHECK = ["mypy==1.19.1", "django-stubs==5.2.9", "django-stubs-ext==5.2.9",
             "import-linter==2.17"]


@nox.session(python=["3.11"])
def lint(session: nox.Session) -> None:
    """ruff, mypy, the layers (lint-imports), `manage.py check` and a missing-migration
    check, on Django 5.2."""
    _, django, extras, _ = MATRIX[0]
    session.install("-e", ".[test,typecheck]", django, *extras, *TYPECHECK)
    session.run("ruff", "check", ".")
    session.run("mypy")
    session.run("lint-imports")  # the layers: [tool.importlinter] in pyproject.toml
    env = {"DJANGO_SETTINGS_MODULE": "tests.settings", "PYTHONPATH": "."}
    session.run("python", "-m", "django", "check", "--fail-level", "WARNING", env=env)
    session.run("python", "-m", "django", "makemigrations", "--check", "--dry-run", env=env)
    session.run("python", "example_project/manage.py", "check", "--fail-level", "WARNING")


@nox.session(python=["3.11"])
def docs(session: nox.Session) -> None:
    """Build the manual (docs/) as HTML, every warning an error and every reference
    resolved (`-W -n`); nothing is fetched while building. The HTML lands in the
    session's tmp folder, or in the folder given as the first argument."""
    _, django, extras, _ = MATRIX[0]
    # metrics: the reference lists the metrics from prometheus-client's own objects.
    session.install("-e", ".[docs,metrics]", django, *extras)
    out = Path(session.posargs[0]) if session.posargs else \
        Path(session.create_tmp()).resolve() / "html"
    session.run("sphinx-build", "-W", "-n", "--keep-going", "-b", "html", "docs", str(out))


@nox.session(python=["3.11"])
def package(session: nox.Session) -> None:
    """Build the sdist and the wheel, `twine check` them, then tests/test_packaging.py on
    them: every package file in both, and the wheel alone in a new virtualenv runs the
    example's demo."""
    session.install("-e", ".[test]", "django>=5.2,<5.3")
    dist = Path(session.create_tmp()).resolve() / "dist"
    shutil.rmtree(dist, ignore_errors=True)
    session.run("python", "-m", "build", "--outdir", str(dist), ".")
    session.run("python", "-m", "twine", "check", "--strict", *map(str, sorted(dist.iterdir())))
    session.run("python", "-m", "pytest", "tests/test_packaging.py", "-p", "no:randomly",
                *session.posargs, env={"LATERITE_DIST": str(dist), "LATERITE_TEST_DB": "sqlite"})


@nox.session
@nox.parametrize(
    ("python", "django", "extras"),
    [nox.param(py, dj, ex, id=f"py{py}-{name}") for py, dj, ex, name in MATRIX],
)
def example(session: nox.Session, django: str, extras: list[str]) -> None:
    """The example project's tests (`manage.py test`) on SQLite, PostgreSQL and Redis."""
    session.install("-e", ".[test]", django, *extras)
    stores = os.environ.get("EXAMPLE_STORES", "sqlite,postgres,redis").split(",")
    with session.chdir("example_project"):
        for store in stores:
            # EXAMPLE_REDIS_URL (Redis db 1 by default) reaches manage.py with the rest of
            # nox's environment.
            env = {
                "EXAMPLE_STORE": store,
                "EXAMPLE_LOG_LEVEL": "ERROR",  # the declined card's expected warnings
                "EXAMPLE_PG_NAME": f"laterite_example_py{session.python.replace('.', '')}",
                "EXAMPLE_PG_TEST_NAME": f"{PG_TEST_PREFIX}_example_py"
                                        f"{session.python.replace('.', '')}",
            }
            session.run("python", "manage.py", "test", *session.posargs, env=env)


@nox.session(python=["3.11"])
def tests(session: nox.Session) -> None:
    """The whole suite: the legs (LEGS, or one per Django and database with
    LATERITE_TEST_FULL=1), SLOTS at a time, the next leg starting as soon as one ends.

    This session's virtualenv serves Django 5.2; Django 6 gets one of its own on
    Python 3.12 beside it. Most tests wait on worker subprocesses, so the legs share
    two cores well; each leg's output is printed whole when it ends.
    LATERITE_TEST_DBS (e.g. `sqlite`) runs only the legs on those databases.
    """
    pythons: dict[str, Path] = {}
    for py, django, extras, name in MATRIX:
        if py == session.python:
            session.install("-e", ".[test]", django, *extras)
            pythons[name] = Path(session.bin) / "python"
            continue
        venv = Path(session.virtualenv.location).parent / f"tests-{name}"
        # run_install, not run: these are install steps, so `--install-only` makes them too.
        if not (venv / "bin" / "python").exists():
            session.run_install(f"python{py}", "-m", "venv", str(venv), external=True)
        pythons[name] = venv / "bin" / "python"
        session.run_install(str(pythons[name]), "-m", "pip", "install", "-q", "-e", ".[test]",
                            django, *extras, external=True)
    if session._runner.global_config.install_only:  # nox has no public flag for it
        session.log("Skipping the legs, as --install-only is set.")
        return
    waiting = chosen_legs(os.environ.get("LATERITE_TEST_FULL") == "1",
                          os.environ.get("LATERITE_TEST_DBS"))
    cluster_ports = {leg.id: CLUSTER_PORT + 20 * i for i, leg in enumerate(waiting)}
    running: list[tuple[Leg, subprocess.Popen, IO[str], float]] = []
    failed: list[str] = []
    while waiting or running:
        while waiting and len(running) < SLOTS:
            leg = waiting.pop(0)
            running.append((leg, *_start_leg(pythons[leg.django], leg, session.posargs,
                                             cluster_ports[leg.id]),
                            time.monotonic()))
        time.sleep(1)
        for entry in [entry for entry in running if entry[1].poll() is not None]:
            running.remove(entry)
            leg, proc, log, started = entry
            log.seek(0)
            print(f"\n===== tests: {leg.id} ({time.monotonic() - started:.0f} s) =====\n"
                  f"{log.read()}", flush=True)
            log.close()
            if proc.returncode != 0:
                failed.append(f"{leg.id} (exit {proc.returncode})")
    if failed:
        session.error(f"pytest failed: {', '.join(failed)}")


def chosen_legs(full: bool, databases: str | None) -> list[Leg]:
    """The legs to run, longest first: LEGS on the chosen databases (all by default),
    or with `full` one leg per Django and database running everything on both stores."""
    if full:
        return [Leg(name, db, "database,redis") for _, _, _, name in MATRIX
                for db in (databases or FULL_DATABASES[name]).split(",")]
    if not databases:
        return list(LEGS)
    return [leg for leg in LEGS if leg.database in databases.split(",")]


def _leg_folder(leg_id: str) -> Path:
    """The folder of one leg's SQLite file and log (under LATERITE_NOX_TMP)."""
    return NOX_TMP / leg_id


def _start_leg(python: Path, leg: Leg, posargs: list[str], cluster_port: int = CLUSTER_PORT
               ) -> tuple[subprocess.Popen, IO[str]]:
    """Start pytest for one leg, its output to a file. The environment passes through:
    LATERITE_REDIS_URL chooses the tests' Redis (db 15 by default, tests/settings.py);
    the legs' test keys are apart under each process's own prefix; a Redis Cluster a
    leg's tests start listens from `cluster_port` on."""
    work = _leg_folder(leg.id)
    work.mkdir(parents=True, exist_ok=True)
    env = {
        # Without PYTHONDONTWRITEBYTECODE (set on some machines): the suite starts
        # worker and manage.py processes by the hundred, and each would otherwise compile
        # the package anew (about a quarter of a second of CPU per process here).
        **{key: value for key, value in os.environ.items()
           if key != "PYTHONDONTWRITEBYTECODE"},
        "LATERITE_TEST_STORES": leg.stores,
        "LATERITE_TEST_STORE_TESTS_ONLY": "1" if leg.store_tests_only else "",
        "LATERITE_TEST_DB": leg.database,
        "LATERITE_SQLITE_FILE": str(work / "test.sqlite3"),
        "LATERITE_PG_TEST_NAME": f"{PG_TEST_PREFIX}_{re.sub(r'[^a-z0-9]+', '_', leg.id)}",
        "LATERITE_TEST_CLUSTER_PORT": str(cluster_port),
    }
    # The package session runs tests/test_packaging.py on the files it built.
    args = [*leg.paths, "--ignore=tests/test_packaging.py", *posargs]
    if leg.markers:
        args += ["-m", leg.markers]
    log = open(work / "pytest.log", "w+")  # noqa: SIM115 -- closed by the caller
    proc = subprocess.Popen([str(python), "-m", "pytest", *args], env=env, stdout=log,
                            stderr=subprocess.STDOUT)
    return proc, log
