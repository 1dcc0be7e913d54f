"""The commands and their store: one line, never a traceback, for a store that is down or
not migrated; `queue_work` checks its store once before it starts any worker.

A store that cannot be reached raises `StoreUnavailable`, whose message names
the store and its address; missing tables raise its subclass
`StoreNotMigrated`, which says to run `migrate`. A command turns either into a
`CommandError` (exit 1). `queue_work` exits the same way when the tables are
missing, but waits for a store that is down: a worker outlives an outage.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from django.apps import AppConfig
from django.core import checks
from django.core.management.base import BaseCommand, CommandError
from django.db import DatabaseError, connections, router

from ..conf import settings
from ..core.backoff import Growing
from ..exceptions import StoreNotMigrated, StoreUnavailable
from ..stores import Store
from ..stores.errors import database_outage, describe_database, drop_connections
from .console import describe_store, version

__all__ = ["StoreCommand", "check_store", "unapplied_migrations", "wait_for_store", "warn_of"]

logger = logging.getLogger("laterite")

# The longest wait between two looks at a store that is down, at start-up.
WAIT_CAP = 5.0


class StoreCommand(BaseCommand):
    """A queue_* command: a store that is down or not migrated ends it with its one-line
    message and exit status 1."""

    def get_version(self) -> str:
        """`--version` prints laterite's version (Django's would say nothing of the app)."""
        return version()

    def check(
        self,
        app_configs: Sequence[AppConfig] | None = None,
        tags: Sequence[str] | None = None,
        display_num_errors: bool = False,
        include_deployment_checks: bool = False,
        fail_level: int = checks.ERROR,
        databases: Sequence[str] | None = None,
    ) -> None:
        """The system checks, without connecting to a database: Django 6 hands every
        database to the model checks (a JSONField asks its database what it supports),
        and a store that is down must be said by the store check, in one line."""
        super().check(app_configs, tags, display_num_errors, include_deployment_checks,
                      fail_level, databases or [])

    def execute(self, *args: Any, **options: Any) -> Any:
        try:
            return super().execute(*args, **options)
        except StoreUnavailable as e:
            raise CommandError(str(e)) from e
        except DatabaseError as e:  # a read through the ORM (the failed list, task results)
            outage = database_outage(e, settings.DATABASE)
            if outage is None:
                raise
            raise CommandError(str(outage)) from e


def unapplied_migrations(alias: str) -> list[str]:
    """laterite's migrations not applied to database `alias` (none where a router keeps
    its tables out of that database)."""
    from django.db.migrations.loader import MigrationLoader

    if not router.allow_migrate(alias, "laterite_django"):
        return []
    try:
        loader = MigrationLoader(connections[alias], ignore_no_migrations=True)
    except DatabaseError as e:
        outage = database_outage(e, alias)
        if outage is None:
            raise
        raise outage from e
    return sorted(
        name for app, name in loader.graph.nodes
        if app == "laterite_django" and (app, name) not in loader.applied_migrations
    )


def check_store(store: Store) -> None:
    """Raise StoreUnavailable unless `store` answers, StoreNotMigrated unless its
    database has every laterite migration (an upgrade may add tables or columns)."""
    store.ping()
    missing = unapplied_migrations(store.database)
    if missing:
        raise StoreNotMigrated(
            f"laterite's tables are missing or out of date in "
            f"{describe_database(store.database)} (migrations not applied: "
            f"{', '.join(missing)}): run `python manage.py migrate`."
        )


@contextmanager
def _stop_on_signals(stop: threading.Event) -> Iterator[None]:
    """SIGINT and SIGTERM set `stop` (a worker waiting for its store just leaves)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    sigs = (signal.SIGINT, signal.SIGTERM)
    previous = {sig: signal.signal(sig, lambda *_: stop.set()) for sig in sigs}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def wait_for_store(store: Store, *, give_up_after: float | None = None) -> bool:
    """Check `store`; while it is down, say so once and look again with backoff.

    Return True once it answers (saying so if it was down), False if a stop
    signal came first. StoreNotMigrated propagates: waiting would not help.
    A store still down after `give_up_after` seconds raises CommandError.
    SIGINT and SIGTERM are caught from the first check on, so a signal sent
    once "waiting for it to come back" is logged always ends the wait cleanly.
    """
    stop = threading.Event()
    with _stop_on_signals(stop):
        _wait_for(store, stop, give_up_after)
    if stop.is_set():
        # Also a signal that came after the store answered: the worker's own handlers
        # are not in place yet, so it must not be lost here.
        logger.info("Stopped while waiting for the store",
                    extra={"action": "worker_stopped", "reason": "stopped"})
        return False
    return True


def _wait_for(store: Store, stop: threading.Event, give_up_after: float | None) -> None:
    """Return once `store` answers or `stop` is set (see wait_for_store)."""
    try:
        check_store(store)
        warn_of(store)
        return
    except StoreNotMigrated:
        raise
    except StoreUnavailable as e:
        logger.error("Store unavailable: %s; waiting for it to come back", str(e).rstrip(". "),
                     extra={"action": "store_unavailable"})
        error: StoreUnavailable = e
        drop_connections(store)
    started = time.monotonic()
    waits = Growing(0.25, cap=WAIT_CAP)
    while True:
        wait = waits.next()
        if give_up_after is not None:
            left = give_up_after - (time.monotonic() - started)
            if left <= 0:
                raise CommandError(f"{str(error).rstrip('. ')}; still unavailable after "
                                   f"{give_up_after:g} s (--max-seconds)")
            wait = min(wait, left)
        if stop.wait(wait):
            return
        try:
            check_store(store)
        except StoreNotMigrated:
            raise
        except StoreUnavailable as e:
            error = e
            logger.debug("Store still unavailable: %s", e,
                         extra={"action": "store_unavailable"})
            drop_connections(store)
            continue
        logger.info("Store available again after %.1f s: %s", time.monotonic() - started,
                    describe_store(store), extra={"action": "store_back"})
        warn_of(store)
        return


def warn_of(store: Store) -> None:
    """Log each of the store's warnings (`Store.warnings`: a server set to lose jobs).
    A failure to read them is not the worker's concern: it is logged, and work goes on."""
    try:
        found = store.warnings()
    except Exception as e:  # the store answered a moment ago; this is advice only
        logger.debug("Could not read the store's settings: %s", e,
                     extra={"action": "store_warnings"})
        return
    for warning in found:
        logger.warning(warning, extra={"action": "store_warning"})

