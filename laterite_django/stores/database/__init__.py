"""The `database` store: jobs in the Django database, on PostgreSQL or SQLite.

store.py holds the store (DatabaseStore); postgres.py and sqlite.py every statement
of each dialect, sql.py those both share; wait.py how idle workers wait; workflows.py
the batch counts; vacuum.py and pgbouncer.py PostgreSQL's upkeep and pooler check.
"""

from .store import DatabaseStore

__all__ = ["DatabaseStore"]
