"""The live workers' list on the database stores: a row of `laterite_worker` per worker
process, its beat dated by the database's clock (NOW()), so that hosts whose clocks
differ list their workers alike (`WorkerRows`, owned by DatabaseStore)."""

from __future__ import annotations

import time

from django.apps import apps
from django.db import IntegrityError, transaction
from django.db.models import DateTimeField, ExpressionWrapper
from django.db.models.functions import Now

from ...core.workers import KEEP_LOST, PRUNE_EVERY, WorkerInfo

__all__ = ["WorkerRows"]


class WorkerRows:
    """A database store's live workers' list (Store.beat_worker, remove_worker, workers)."""

    def __init__(self, database: str) -> None:
        self.database = database
        self.pruned_at = 0.0  # monotonic time of the next removal of lost workers

    def _rows(self):
        # By name: the stores are imported before the apps are loaded.
        return apps.get_model("laterite_django", "WorkerRecord")._default_manager.using(
            self.database)

    def beat(self, info: WorkerInfo) -> None:
        """Write the entry of `info`'s worker, beaten now by the database's clock."""
        rows = self._rows()
        fields = {"name": info.name, "host": info.host, "pid": info.pid,
                  "version": info.version, "queues": list(info.queues),
                  "concurrency": info.concurrency, "started_at": info.started_at,
                  "jobs": list(info.jobs), "beat_at": Now()}
        if not rows.filter(pk=info.id).update(**fields):
            try:
                with transaction.atomic(using=self.database):
                    rows.create(id=info.id, **fields)
            except IntegrityError:  # written meanwhile by another thread of its process
                rows.filter(pk=info.id).update(**fields)
        if time.monotonic() >= self.pruned_at:
            self.pruned_at = time.monotonic() + PRUNE_EVERY
            before = ExpressionWrapper(Now() - KEEP_LOST, output_field=DateTimeField())
            rows.filter(beat_at__lt=before).delete()

    def remove(self, worker_id: str) -> None:
        self._rows().filter(pk=worker_id).delete()

    def read(self) -> list[WorkerInfo]:
        """Every worker listed, by host and pid, each with its age by the database's clock."""
        found = []
        rows = self._rows().annotate(store_now=Now()).order_by("host", "pid", "id")
        for row in rows:
            found.append(WorkerInfo(
                id=row.id, name=row.name, host=row.host, pid=row.pid, version=row.version,
                queues=list(row.queues), concurrency=row.concurrency,
                started_at=row.started_at, jobs=[int(i) for i in row.jobs],
                beat_at=row.beat_at,
                age=max(0.0, (row.store_now - row.beat_at).total_seconds()),
            ))
        return found
