"""The systems under test: which adapter module, which virtualenv, which store.

Stdlib only: the orchestrator reads this without any peer installed.
Each adapter module `bench.systems.<module>` defines `System(base.System)`
and is imported only inside its own virtualenv, by `bench.driver`.
"""

from pathlib import Path

__all__ = ["ROOT", "SYSTEMS", "VENVS", "System"]

ROOT = Path(__file__).resolve().parents[2]

# venv name -> pip requirements. Peers are pinned so a run is repeatable.
VENVS = {
    "floor": ["psycopg[binary]==3.3.9", "redis==8.1.0"],
    "pgqueuer": ["pgqueuer==1.6.0", "asyncpg==0.32.0", "psycopg[binary]==3.3.9"],
    "procrastinate": ["procrastinate==3.10.0", "psycopg[binary]==3.3.9"],
    "django_tasks_db": [
        "django-tasks-db==0.13.0",
        "django-tasks==0.12.0",
        "Django==5.2.*",
        "psycopg[binary]==3.3.9",
        "redis==8.1.0",
    ],
    "django_q2": ["django-q2==1.11.1", "Django==5.2.*", "psycopg[binary]==3.3.9", "redis==8.1.0"],
    "huey": ["huey==3.5.4", "redis==8.1.0"],
    "rq": ["rq==2.12.0", "redis==8.1.0"],
    "celery": ["celery[redis]==5.7.0", "redis==8.1.0"],
    # laterite from this working tree, editable, with the store extras spelled
    # out too in case the extras are renamed.
    "laterite": [
        "-e",
        f"{ROOT}[postgres,redis]",
        "Django==5.2.*",
        "psycopg[binary]==3.3.9",
        "django-redis==7.0.0",
        "redis==8.1.0",
    ],
    "report": ["matplotlib==3.11.2"],
}


class System:
    """One row of the table (a description, not the adapter itself)."""

    def __init__(self, name, module, venv, label, store, kind, redis_db=None):
        self.name = name
        self.module = module
        self.venv = venv
        self.label = label
        self.store = store
        self.kind = kind  # "floor", "peer" or "laterite"
        self.redis_db = redis_db


_ALL = [
    System(
        "floor_pg",
        "floor_pg",
        "floor",
        "bare psycopg: DELETE ... SKIP LOCKED RETURNING per job",
        "PostgreSQL",
        "floor",
    ),
    System(
        "floor_pg_update",
        "floor_pg",
        "floor",
        "bare psycopg: UPDATE claim, then DELETE per job",
        "PostgreSQL",
        "floor",
    ),
    System(
        "floor_pg_batch",
        "floor_pg",
        "floor",
        "bare psycopg: claim 100 at a time",
        "PostgreSQL",
        "floor",
    ),
    System("pgqueuer", "pgqueuer", "pgqueuer", "pgqueuer", "PostgreSQL", "peer"),
    System(
        "procrastinate", "procrastinate", "procrastinate", "Procrastinate", "PostgreSQL", "peer"
    ),
    System("django_q2", "django_q2", "django_q2", "django-q2, ORM broker", "PostgreSQL", "peer"),
    System(
        "django_tasks_db",
        "django_tasks_db",
        "django_tasks_db",
        "django-tasks-db, db_worker",
        "PostgreSQL",
        "peer",
    ),
    System("laterite_pg", "laterite", "laterite", "laterite_django", "PostgreSQL", "laterite"),
    System(
        "floor_redis",
        "floor_redis",
        "floor",
        "bare redis-py: LMOVE + LREM",
        "Redis",
        "floor",
        redis_db=9,
    ),
    System("huey", "huey", "huey", "Huey", "Redis", "peer", redis_db=10),
    System("rq", "rq", "rq", "RQ, Worker (fork per job)", "Redis", "peer", redis_db=11),
    System("rq_simple", "rq", "rq", "RQ, SimpleWorker", "Redis", "peer", redis_db=12),
    System("celery", "celery", "celery", "Celery, solo pool", "Redis", "peer", redis_db=13),
    System(
        "laterite_redis",
        "laterite",
        "laterite",
        "laterite_django",
        "Redis",
        "laterite",
        redis_db=14,
    ),
    System("laterite_sqlite", "laterite", "laterite", "laterite_django", "SQLite", "laterite"),
]

SYSTEMS = {s.name: s for s in _ALL}
