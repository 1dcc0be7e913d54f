"""Where encrypted arguments rest, each place read and rewritten a chunk at a time by id:
what `queue_rekey` walks and the check of retired keys (checks.check_retired_keys)
samples.

The places: the store's waiting and delayed jobs (the job table, or Redis), the failed
list, the Redis store's outbox (rows a commit left there while Redis was away; read on
every store, empty on the database ones), the batches' callbacks, the job history's
records (on Redis, those listed in P:history before a worker moves them to the table,
then the table's) and the values of encrypted tasks' results.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from django.db import transaction

from .. import encryption, payload
from ..conf import settings
from ..models import Batch, JobRecord, OutboxJob, TaskResultRecord
from ..stores import Store

__all__ = ["Place", "places", "retired_keys"]

Read = Callable[[Any, int], list[tuple[Any, str]]]
Write = Callable[[Sequence[tuple[Any, str, str]]], int]
Sample = Callable[[int], list[str]]


@dataclass(frozen=True, slots=True)
class Place:
    """Rows holding encrypted arguments: `read(after, limit)` gives (id, text) by id,
    `write([(id, old, new)])` sets each row still holding `old`, returning how many;
    `sample(limit)` the texts of a bounded look at it (see retired_keys)."""

    what: str
    read: Read
    write: Write
    sample: Sample
    resume: str | None = None  # the queue_rekey option that starts it after an id
    start: Any = 0  # the id the walk starts after ("" for text ids)


def _column(model: Any, field: str) -> tuple[Read, Write, Sample]:
    """read, write and sample of a text column of `model` on laterite's database: read
    gives the rows whose column holds a sealed part (encryption's mark) by id; a row is
    rewritten only if it still holds the text read; sample gives the column of the
    first rows by id, whatever they hold (one index range, however large the table)."""
    database = settings.DATABASE

    def rows() -> Any:
        return model.objects.using(database)

    def read(after: int, limit: int) -> list[tuple[int, str]]:
        found = rows().filter(pk__gt=after, **{f"{field}__contains": encryption.SEALED_MARK})
        return list(found.order_by("pk").values_list("pk", field)[:limit])

    def write(changes: Sequence[tuple[int, str, str]]) -> int:
        count = 0
        with transaction.atomic(using=database):
            for pk, old, new in changes:
                count += rows().filter(pk=pk, **{field: old}).update(**{field: new})
        return count

    def sample(limit: int) -> list[str]:
        return list(rows().order_by("pk").values_list(field, flat=True)[:limit])

    return read, write, sample


def _sealed_json(model: Any, field: str, wrapped: bool) -> tuple[Read, Write, Sample]:
    """read, write and sample of a JSON column of `model` holding a sealed part: the
    sealed dict itself (`wrapped` False: JobRecord.encrypted) or {"encrypted": sealed}
    (True: an encrypted task's return value). Each row is given as the text
    {"encrypted": {"key", "ct"}} (the database may reorder a JSON object's keys) and
    rewritten only if it still holds what was read, its row locked meanwhile."""
    database = settings.DATABASE

    def rows() -> Any:
        return model.objects.using(database)

    def as_text(value: Any) -> str:
        sealed = value.get(payload.SEALED_KEY) if wrapped and isinstance(value, dict) else value
        if not isinstance(sealed, dict):
            return ""
        return payload._encoder.encode({payload.SEALED_KEY: {
            "key": sealed.get("key"), "ct": sealed.get("ct")}})

    def holding() -> Any:
        test: dict[str, Any] = ({f"{field}__has_key": payload.SEALED_KEY} if wrapped
                                else {f"{field}__isnull": False})
        return rows().filter(**test)

    def read(after: Any, limit: int) -> list[tuple[Any, str]]:
        found = holding().filter(pk__gt=after).order_by("pk").values_list("pk", field)
        return [(pk, as_text(value)) for pk, value in found[:limit]]

    def write(changes: Sequence[tuple[Any, str, str]]) -> int:
        count = 0
        with transaction.atomic(using=database):
            for pk, old, new in changes:
                row = rows().select_for_update().filter(pk=pk).values_list(field, flat=True)
                if [as_text(value) for value in row] != [old]:
                    continue  # gone, or changed since it was read
                sealed = json.loads(new)
                count += rows().filter(pk=pk).update(
                    **{field: sealed if wrapped else sealed[payload.SEALED_KEY]})
        return count

    def sample(limit: int) -> list[str]:
        found = rows().order_by("pk").values_list(field, flat=True)[:limit]
        return [as_text(value) for value in found]

    return read, write, sample


def places(store: Store) -> list[Place]:
    """Every place encrypted arguments rest, for `store`."""
    found = [
        Place("waiting or delayed jobs", store.unclaimed_payloads, store.replace_payloads,
              store.sample_payloads, "--after"),
        Place("failed jobs", store.failed_payloads, store.replace_failed_payloads,
              lambda limit: [text for _, text in store.failed_payloads(0, limit)],
              "--failed-after"),
        Place("outbox jobs", *_column(OutboxJob, "payload"), "--outbox-after"),
    ]
    for field, name in (("then_call", "then"), ("catch_call", "catch"),
                        ("finally_call", "finally_")):
        found.append(Place(f"batch {name} callbacks", *_column(Batch, field)))
    # Before the table: a record a move takes meanwhile is in the table when it is read.
    found.append(Place("history records waiting in Redis", store.listed_history_payloads,
                       store.replace_listed_history_payloads, store.sample_listed_history))
    found.append(Place("history records", *_sealed_json(JobRecord, "encrypted", False)))
    found.append(Place("task results", *_sealed_json(TaskResultRecord, "return_value", True),
                       start=""))
    return found


def retired_keys(store: Store, listed: Sequence[str], limit: int
                 ) -> dict[str, tuple[set[str], int]]:
    """Look at `limit` rows of each place (Place.sample: the first by id, the oldest,
    where rows under a retired key sit; on Redis, the first `limit` of each queue's
    ready and delayed jobs) and return, by place, the key ids found that `listed` does
    not have and how many rows hold one. Places with none are left out."""
    found: dict[str, tuple[set[str], int]] = {}
    known = set(listed)
    for place in places(store):
        retired: set[str] = set()
        rows = 0
        for text in place.sample(limit):
            ids = encryption.key_ids(text) - known
            if ids:
                retired |= ids
                rows += 1
        if rows:
            found[place.what] = (retired, rows)
    return found
