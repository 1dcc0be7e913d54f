"""queue_workers: the live workers' list from the shell, as a table or JSON, on every store."""

from __future__ import annotations

import json
from io import StringIO

from django.core.management import call_command

from tests.stores.test_store_workers import info, set_beat_back


def run(*args: str) -> str:
    out = StringIO()
    call_command("queue_workers", *args, stdout=out)
    return out.getvalue()


def test_no_worker(store):
    assert run() == "No worker is running.\n"
    assert json.loads(run("--json")) == {"retry_after": 90.0, "workers": []}


def test_a_table_of_alive_and_lost_workers(store):
    store.beat_worker(info("web-1:10", jobs=list(range(100, 107)), concurrency=4))
    store.beat_worker(info("web-2:20"))
    set_beat_back(store, "web-2:20", 4000)
    lines = run().splitlines()
    assert lines[0].split() == ["host", "pid", "version", "queues", "conc", "started",
                                "last", "beat", "jobs", "state"]
    alive, lost = lines[1], lines[2]
    assert alive.split()[:5] == ["web-1", "10", "1.2.3", "default,mail", "4"]
    assert "#100 #101 #102 #103 #104 +2" in alive and alive.endswith("alive")
    assert "66 min ago" in lost and lost.endswith("lost")
    assert lines[-1] == "1 worker alive, 1 lost (no heartbeat for over 90 s)"


def test_json_says_every_field(store):
    started = info("web-1:10").started_at
    store.beat_worker(info("web-1:10", jobs=[5, 6], started_at=started))
    [entry] = json.loads(run("--json"))["workers"]
    assert entry.pop("beat_at") and 0 <= entry.pop("beat_age") < 5
    assert entry == {"id": "web-1:10", "name": "web-1:10", "host": "web-1", "pid": 10,
                     "version": "1.2.3", "queues": ["default", "mail"], "concurrency": 1,
                     "started_at": started.isoformat(), "jobs": [5, 6], "lost": False}
