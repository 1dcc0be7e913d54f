"""Ordered sequences (`@job(sequence=...)`): what a job's payload says of the sequence it
belongs to, the one thing every store reads to keep a sequence's jobs one at a time in
push order.

A job of a sequence carries its key first in its payload, before its arguments:

    {"seq":["acct:7",0],"args":[...],...}       0: wait on a failure, 1: continue
    {"seq":["acct:7",0,123],"args":[...],...}   retried from failed job 123

The mark is first so that a store knows a job of a sequence by `startswith` alone
(an argument can never be at the start of the text), and it travels with the job
everywhere its payload goes: the claim, the failed list, the outbox. The third item
is written by a retry from the failed list: the retried job takes the head of its
sequence again if the sequence is still held by that failed job.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from itertools import repeat

__all__ = ["HELD_AT", "MARK", "ON_FAILURE", "HeldSequence", "SequenceMark", "any_sequenced",
           "as_retry_of", "sequence_of", "with_sequence"]

# How a payload of a sequence starts.
MARK = '{"seq":['
# The values of @job(sequence_on_failure=...).
ON_FAILURE = ("wait", "continue")
# The due time of a job held behind its sequence's head on the database stores: never
# due, so never claimed, until promoted.
HELD_AT = datetime(9000, 1, 1, tzinfo=UTC)

_encoder = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)
_HEAD = re.compile(r'\{"seq":\[("(?:[^"\\]|\\.)*"),([01])(?:,(\d+))?\],')


@dataclass(frozen=True, slots=True)
class HeldSequence:
    """A sequence whose head failed for good and holds the rest: its key, the failed
    head's job id while queued (the failed list's `job_id`), how many jobs wait behind
    it, and the failed head's queue and row in the failed list ("" and None if it has
    none: its removal is under way)."""

    key: str
    job_id: int | None
    waiting: int
    queue: str = ""
    failed_id: int | None = None


@dataclass(frozen=True, slots=True)
class SequenceMark:
    """The sequence a job belongs to: its key, whether the rest go on when it fails for
    good, and the failed job it was retried from (None: not a retry)."""

    key: str
    go_on: bool
    retry_of: int | None = None


def with_sequence(text: str, key: str, go_on: bool) -> str:
    """The payload `text` (a JSON object) marked as a job of sequence `key`."""
    return f'{MARK}{_encoder.encode(key)},{int(go_on)}],{text[1:]}'


def sequence_of(text: str) -> SequenceMark | None:
    """The sequence of a payload, or None (most jobs: known by its first characters)."""
    if not text.startswith(MARK):
        return None
    found = _HEAD.match(text)
    if found is None:
        return None
    return SequenceMark(json.loads(found[1]), found[2] == "1",
                        None if found[3] is None else int(found[3]))


def as_retry_of(text: str, failed_job_id: int | None) -> str:
    """The payload of a job of a sequence retried from the failed list (its job id
    `failed_job_id` while queued): marked as that job's retry. Others as they are."""
    mark = sequence_of(text)
    if mark is None or failed_job_id is None:
        return text
    found = _HEAD.match(text)
    assert found is not None
    return (f'{MARK}{found[1]},{found[2]},{int(failed_job_id)}],'
            f'{text[found.end():]}')


def any_sequenced(payloads: Iterable[str]) -> bool:
    """Whether any of these payloads is of a job of a sequence (cheap: a prefix test)."""
    # map() calls startswith from C: no Python frame per payload on the claim's path.
    return any(map(str.startswith, payloads, repeat(MARK)))
