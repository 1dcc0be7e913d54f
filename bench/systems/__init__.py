"""The systems under test: which adapter module, which virtualenv, which store.

Stdlib only: the orchestrator reads this without any peer installed.
Each adapter module `bench.systems.<module>` defines `System(base.System)`
and is imported only inside its own virtualenv, by `bench.driver`.

`laterite_pg@2d1d5a0` (any laterite row, `@`, a commit) is laterite as it was
at that commit: its own virtualenv `laterite-<commit>` with the package
installed (not editable) from `bench/.ref/<commit>`, its own database and
Redis db, and this tree's bench code on a path without this tree's package.
"""

import re
from pathlib import Path

__all__ = [
    "REF_BASES",
    "ROOT",
    "SCALE_SCENARIOS",
    "SCENARIO_ROWS",
    "SYSTEMS",
    "VENVS",
    "System",
    "code_root",
    "ref_tree",
    "requirements",
    "slug",
    "system",
]

ROOT = Path(__file__).resolve().parents[2]
REF_DIR = ROOT / "bench" / ".ref"
# A directory holding only a `bench` symlink: the earlier commit's rows put it on
# sys.path (and run from it) so that `import laterite_django` finds the installed
# package, not this working tree's.
REF_PATH = REF_DIR / "path"

# Every system that speaks to Redis gets redis-py's C reply parser (hiredis), as
# laterite's `redis` extra installs it.
REDIS = ["redis==8.1.0", "hiredis==3.5.0"]
# venv name -> pip requirements. Peers are pinned so a run is repeatable.
VENVS = {
    "floor": ["psycopg[binary]==3.3.9", *REDIS],
    "pgqueuer": ["pgqueuer==1.6.0", "asyncpg==0.32.0", "psycopg[binary]==3.3.9"],
    "procrastinate": ["procrastinate==3.10.0", "psycopg[binary]==3.3.9"],
    "django_tasks_db": [
        "django-tasks-db==0.13.0",
        "django-tasks==0.12.0",
        "Django==5.2.*",
        "psycopg[binary]==3.3.9",
        *REDIS,
    ],
    "django_q2": ["django-q2==1.11.1", "Django==5.2.*", "psycopg[binary]==3.3.9", *REDIS],
    "huey": ["huey==3.5.4", *REDIS],
    "rq": ["rq==2.12.0", *REDIS],
    "celery": ["celery[redis]==5.7.0", *REDIS],
    # laterite from this working tree, editable, with the store extras spelled
    # out too in case the extras are renamed.
    "laterite": [
        "-e",
        f"{ROOT}[postgres,redis,crypto]",  # crypto: the *_encrypted rows
        "Django==5.2.*",
        "psycopg[binary]==3.3.9",
        "django-redis==7.0.0",
        *REDIS,
        "prometheus-client==0.26.0",  # for --laterite-args "--metrics-port 0"
    ],
    "report": ["matplotlib==3.11.2"],
}
# What both laterite venvs pin besides laterite itself.
LATERITE_PINS = VENVS["laterite"][2:]


class System:
    """One row of the table (a description, not the adapter itself)."""

    def __init__(self, name, module, venv, store, kind, redis_db, label, base=None, ref=None):
        self.name = name
        self.base = base or name  # the row this one is an earlier commit of
        self.ref = ref  # that commit (short hash), or None for this working tree
        self.module = module  # bench.systems.<module> holds its adapter
        self.venv = venv  # bench/.venvs/<venv>
        self.store = store
        self.kind = kind  # "floor", "peer" or "laterite"
        self.redis_db = redis_db
        self.label = label


PG, REDIS, SQLITE = "PostgreSQL", "Redis", "SQLite"

# fmt: off
_ALL = [
    # name, adapter module, venv, store, kind, Redis db, label
    System("floor_pg", "floor_pg", "floor", PG, "floor", None,
           "bare psycopg: DELETE ... SKIP LOCKED RETURNING per job"),
    System("floor_pg_update", "floor_pg", "floor", PG, "floor", None,
           "bare psycopg: UPDATE claim, then DELETE per job"),
    System("floor_pg_batch", "floor_pg", "floor", PG, "floor", None,
           "bare psycopg: claim 100 at a time"),
    System("pgqueuer", "pgqueuer", "pgqueuer", PG, "peer", None, "pgqueuer"),
    System("procrastinate", "procrastinate", "procrastinate", PG, "peer", None, "Procrastinate"),
    System("django_q2", "django_q2", "django_q2", PG, "peer", None,
           "django-q2, ORM broker, as shipped"),
    System("django_q2_tuned", "django_q2", "django_q2", PG, "peer", None,
           "django-q2, ORM broker, tuned (CONN_MAX_AGE=None)"),
    System("django_tasks_db", "django_tasks_db", "django_tasks_db", PG, "peer", None,
           "django-tasks-db, db_worker, as shipped"),
    System("django_tasks_db_tuned", "django_tasks_db", "django_tasks_db", PG, "peer", None,
           "django-tasks-db, tuned (CONN_MAX_AGE=None, --interval 0.1)"),
    System("laterite_pg", "laterite", "laterite", PG, "laterite", None, "laterite_django"),
    System("laterite_pg_metrics", "laterite", "laterite", PG, "laterite", None,
           "laterite_django, metrics on"),
    System("laterite_pg_in_batch", "laterite", "laterite", PG, "laterite", None,
           "laterite_django, the jobs in one batch()"),
    System("laterite_pg_encrypted", "laterite", "laterite", PG, "laterite", None,
           "laterite_django, @job(encrypt=True)"),
    System("laterite_pg_history", "laterite", "laterite", PG, "laterite", None,
           "laterite_django, job history kept"),
    System("floor_redis", "floor_redis", "floor", REDIS, "floor", 9,
           "bare redis-py: LMOVE + LREM"),
    System("huey", "huey", "huey", REDIS, "peer", 10, "Huey"),
    System("rq", "rq", "rq", REDIS, "peer", 11, "RQ, Worker (fork per job)"),
    System("rq_simple", "rq", "rq", REDIS, "peer", 12, "RQ, SimpleWorker"),
    System("celery", "celery", "celery", REDIS, "peer", 13, "Celery, solo pool"),
    System("laterite_redis", "laterite", "laterite", REDIS, "laterite", 14, "laterite_django"),
    System("laterite_redis_metrics", "laterite", "laterite", REDIS, "laterite", 7,
           "laterite_django, metrics on"),
    System("laterite_redis_in_batch", "laterite", "laterite", REDIS, "laterite", 2,
           "laterite_django, the jobs in one batch()"),
    System("laterite_redis_encrypted", "laterite", "laterite", REDIS, "laterite", 3,
           "laterite_django, @job(encrypt=True)"),
    System("laterite_redis_history", "laterite", "laterite", REDIS, "laterite", 6,
           "laterite_django, job history kept"),
    System("laterite_sqlite", "laterite", "laterite", SQLITE, "laterite", None, "laterite_django"),
]
# fmt: on

SYSTEMS = {s.name: s for s in _ALL}

# The scale scenarios (bench/scenarios.py) and the rows that take part in each;
# a row at an earlier commit (`laterite_pg@REV`) takes part as its base row.
SCENARIO_ROWS = {
    "churn": ("floor_pg", "pgqueuer", "laterite_pg"),
    "backlog": ("pgqueuer", "laterite_pg", "huey", "laterite_redis"),
    "idle": ("laterite_pg", "laterite_redis", "laterite_sqlite"),
    "flow": ("laterite_pg", "laterite_redis", "laterite_sqlite"),
}
# What `--scenarios scale` runs (flow is asked for by name, or by `all`).
SCALE_SCENARIOS = ("churn", "backlog", "idle")

# laterite rows that `--ref` measures at an earlier commit too.
REF_BASES = ("laterite_pg", "laterite_redis", "laterite_sqlite")
REF_REDIS_DB = 8  # laterite_redis uses 14 (its variants 7, 2, 3 and 6); the tests use 15
# Variants of a laterite row, each measured in alternating rounds with its base row
# and compared with it in the report: workers serving metrics (`--metrics-port 0`),
# the jobs pushed as one batch (`laterite_django.batch`), or a job that encrypts its
# arguments (`@job(encrypt=True)`). Name: (base, what).
VARIANT_ROWS = {
    "laterite_pg_metrics": ("laterite_pg", "metrics on / off"),
    "laterite_redis_metrics": ("laterite_redis", "metrics on / off"),
    "laterite_pg_in_batch": ("laterite_pg", "in one batch / plain"),
    "laterite_redis_in_batch": ("laterite_redis", "in one batch / plain"),
    "laterite_pg_encrypted": ("laterite_pg", "encrypted / plain"),
    "laterite_redis_encrypted": ("laterite_redis", "encrypted / plain"),
    "laterite_pg_history": ("laterite_pg", "history kept / off"),
    "laterite_redis_history": ("laterite_redis", "history kept / off"),
}


def slug(name):
    """`name` made safe for a database or file name (`laterite_pg@2d1d5a0` -> `..._at_...`)."""
    return re.sub(r"[^A-Za-z0-9_]", "_", name.replace("@", "_at_"))


def ref_tree(rev):
    """Where the package of commit `rev` is exported to (by bench/run.py)."""
    return REF_DIR / rev


def system(name):
    """Return the description of row `name`, an earlier commit's (`base@rev`) too."""
    if name in SYSTEMS:
        return SYSTEMS[name]
    base, sep, rev = name.partition("@")
    if not sep or base not in REF_BASES or not re.fullmatch(r"[0-9a-f]{4,40}", rev):
        raise KeyError(
            f"unknown system {name!r}; known: {', '.join(SYSTEMS)}, or one of"
            f" {', '.join(REF_BASES)} followed by @<commit hash>"
        )
    desc = SYSTEMS[base]
    return System(
        name,
        desc.module,
        f"laterite-{rev}",
        desc.store,
        desc.kind,
        REF_REDIS_DB if desc.redis_db is not None else None,
        f"{desc.label} at {rev}",
        base=base,
        ref=rev,
    )


def requirements(venv):
    """The pip arguments of virtualenv `venv` (`laterite-<rev>`: that commit, not editable)."""
    if venv in VENVS:
        return VENVS[venv]
    rev = venv.removeprefix("laterite-")
    return [f"{ref_tree(rev)}[postgres,redis]", *LATERITE_PINS]


def code_root(desc):
    """The directory a system's processes run from and put on PYTHONPATH."""
    return REF_PATH if desc.ref else ROOT
