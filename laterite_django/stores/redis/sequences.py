"""The Redis store's ordered sequences (core/sequences.py; the scripts are lua/_sequence.lua
and the seq_*.lua that include it): the push's arguments, and the reads of held sequences."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...core.sequences import HeldSequence, sequence_of
from ...core.values import NewJob
from .limits import push_fair_args
from .values import pack, text

__all__ = ["held_sequences", "push_seq_args"]


def push_seq_args(now: str, jobs: Sequence[NewJob], once: Sequence[str] | None = None
                  ) -> list[Any]:
    """PUSH_SEQ's arguments after the prefix, up to its sender's: PUSH_FAIR's, and per job
    its sequence ([] for none; else key, '1'/'0': goes on after a failure, the failed job
    it retries or '0')."""
    seqs: list[list[str]] = []
    for job in jobs:
        mark = sequence_of(job.payload)
        seqs.append([] if mark is None else
                    [mark.key, "1" if mark.go_on else "0", str(mark.retry_of or 0)])
    return [*push_fair_args(now, jobs, once), pack(seqs)]


def held_sequences(client: Any, prefix: str, limit: int) -> list[HeldSequence]:
    """The held sequences (`P:seq-failed`), by key: each failed head and the jobs held."""
    keys = sorted(text(key) for key in client.smembers(f"{prefix}:seq-failed"))[:limit]
    pipe = client.pipeline(transaction=False)
    for key in keys:
        pipe.hget(f"{prefix}:seq:{key}", "head")
        pipe.zcard(f"{prefix}:seq:{key}:held")
    values = pipe.execute() if keys else []
    return [HeldSequence(key, int(head) if head else None, int(count))
            for key, head, count in zip(keys, values[0::2], values[1::2], strict=True)]
