"""Store operations run in a subprocess whose database connection goes through a pooler:
`python -m tests.hosts.probe ACTION` with the test settings' environment (the pooler's
port in LATERITE_PG_PORT). Prints what it saw, one line, for the test to read."""

from __future__ import annotations

import os
import sys
import threading

import django

__all__: list[str] = []


def hot() -> str:
    """Push, claim and delete many times: each statement on any server connection."""
    from django.utils import timezone

    from laterite_django.stores import NewJob, get_store

    store = get_store()
    done = 0
    for _ in range(40):
        now = timezone.now()
        store.push([NewJob(name="tests.record", queue="default",
                           payload='{"args":["x"],"kwargs":{}}', available_at=now,
                           pushed_at=now)])
        claims = store.claim(["default"], "probe", limit=1)
        done += store.delete(claims)
    return f"done {done}"


def wait() -> str:
    """Two idle waits with a long `longest`: the first returns at once (a new listener),
    the second returns when woken, or after `timeout` when the store polls."""
    from laterite_django.stores import get_store

    store = get_store()
    stop = threading.Event()
    for _ in range(2):
        store.wait(["default"], 0.2, stop, longest=3600)
    return "returned"


def woken() -> str:
    """An idle wait (with a long `longest`) that a push from this process wakes."""
    from django.utils import timezone

    from laterite_django.stores import NewJob, get_store

    store = get_store()
    stop = threading.Event()
    store.wait(["default"], 0.2, stop, longest=3600)  # the listener is made: returns
    ended = threading.Event()

    def idle() -> None:
        store.wait(["default"], 3600, stop, longest=3600)
        ended.set()

    thread = threading.Thread(target=idle, daemon=True)
    thread.start()
    # Pushed again and again until the waiting thread hears one (it may not listen yet).
    while not ended.wait(0.2):
        now = timezone.now()
        store.push([NewJob(name="tests.record", queue="default",
                           payload='{"args":["x"],"kwargs":{}}', available_at=now,
                           pushed_at=now)])
    return "woken"


def vacuum() -> str:
    """Vacuum through a big clear, then pile up dead rows as finished jobs leave them
    and let the store's look vacuum them."""
    from django.db import connection
    from django.utils import timezone

    from laterite_django.stores import NewJob, get_store
    from laterite_django.stores.database import vacuum as vacuum_module

    store = get_store()

    def push() -> None:
        now = timezone.now()
        store.push([NewJob(name="tests.record", queue="default",
                           payload='{"args":[],"kwargs":{}}', available_at=now, pushed_at=now)
                    for _ in range(vacuum_module.DEAD_ROWS + 2000)])

    push()
    store.clear()  # vacuums before it returns
    push()
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM laterite_job")
        cursor.execute("SELECT pg_stat_force_next_flush()")
    removed = 0
    for _ in range(50):  # the statistics may lag a moment behind the clear
        removed = store.tidy()
        if removed:
            break
        threading.Event().wait(0.1)
    return f"removed {removed}"


def admin() -> str:
    """The admin's job list, failed list and overview, each page's status code."""
    from django.contrib.auth.models import User
    from django.test import Client
    from django.urls import reverse

    user, _ = User.objects.get_or_create(username="probe", is_staff=True, is_superuser=True)
    client = Client()
    client.force_login(user)
    pages = ["admin:laterite_django_job_changelist", "admin:laterite_django_failedjob_changelist",
             "admin:laterite_django_minutecount_changelist"]
    return " ".join(str(client.get(reverse(page)).status_code) for page in pages)


ACTIONS = {"hot": hot, "wait": wait, "woken": woken, "vacuum": vacuum, "admin": admin}

if __name__ == "__main__":
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
    django.setup()
    print(ACTIONS[sys.argv[1]](), flush=True)
