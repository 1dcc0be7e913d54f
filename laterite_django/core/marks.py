"""What a job's payload says of the workflow it belongs to: the rest of its chain and
its place in a batch, kept beside its arguments so that a job retried from the
failed list still carries them.

    {"args": [...], "kwargs": {...}, "chain": [link, ...], "batch": [batch id, position]}

"batch" is always the last key (the Redis store's cancel finds it at the end).

A link is a call not pushed yet: {"job": name, "args": [...], "kwargs": {...}}.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

__all__ = ["Marks", "marks_of", "with_marks"]

_encoder = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)
_KEYS = ('"chain":', '"batch":')
# A batch mark closing a payload as `with_marks` writes it: found without parsing the
# payload (a string inside it cannot hold this text, its quotes would be escaped).
_BATCH_TAIL = re.compile(r',"batch":\[(-?\d+),(-?\d+)\]\}\Z')


@dataclass(frozen=True, slots=True)
class Marks:
    """A job's place in workflows: the links to push after it, its batch and position."""

    chain: list[dict[str, Any]]
    batch: tuple[int, int] | None

    def __bool__(self) -> bool:
        return bool(self.chain) or self.batch is not None


NONE = Marks([], None)


def marks_of(text: str | bytes) -> Marks:
    """The workflow marks of a payload; NONE for most jobs, found without parsing it.
    (The Marks returned may be shared: never change its chain.)"""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    if _KEYS[0] not in text and _KEYS[1] not in text:
        return NONE
    return _remembered(text) if len(text) <= REMEMBER_UP_TO else _marks_of(text)


# A job's marks are read several times as it runs and ends (its context, its end, the
# next link): those of the last payloads seen are remembered, if short (at most
# 1024 of REMEMBER_UP_TO characters each are kept alive).
REMEMBER_UP_TO = 4096


def _marks_of(text: str) -> Marks:
    if _KEYS[0] not in text:
        if _KEYS[1] not in text:
            return NONE
        # The usual job of a batch, marked with no chain: read from the end of its text.
        found = _BATCH_TAIL.search(text, max(0, len(text) - 64))
        if found is not None:
            return Marks([], (int(found[1]), int(found[2])))
    try:
        data = json.loads(text)
    except ValueError:
        return NONE
    if not isinstance(data, dict):
        return NONE
    chain = data.get("chain") or []
    batch = data.get("batch")
    if not isinstance(chain, list) or not all(isinstance(link, dict) for link in chain):
        chain = []
    if not (isinstance(batch, list) and len(batch) == 2 and all(type(v) is int for v in batch)):
        batch = None
    return Marks(chain, None if batch is None else (batch[0], batch[1]))


_remembered = lru_cache(maxsize=1024)(_marks_of)


def with_marks(
    text: str, chain: list[dict[str, Any]] | None = None, batch: tuple[int, int] | None = None
) -> str:
    """The payload `text` with the rest of its chain and its batch position added."""
    if not chain and batch is None:
        return text
    data = json.loads(text)
    if chain:
        data["chain"] = chain
    if batch is not None:
        data.pop("batch", None)
        data["batch"] = list(batch)  # the last key
    return _encoder.encode(data)
