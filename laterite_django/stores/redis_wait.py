"""How an idle worker waits on Redis: blocked on its queues' wake-up lists, with the
claim pipelined behind the pop so a push wakes it with its job already claimed."""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from django.utils import timezone

from . import redis_calls as calls
from .base import Claim
from .errors import guarded
from .redis_values import claims as claims_from_rows
from .redis_values import us

if TYPE_CHECKING:
    import threading

    from redis import Redis

__all__ = ["RedisWaiting"]

# The longest single blocking wait, so a stop request is seen within a second.
_MAX_BLOCK = 1.0

# How late Redis may time out a blocked client (one server tick at the default hz 10).
_SERVER_TICK = 0.1


def _longer(timeout: float, longest: float | None) -> float:
    """How long an idle worker may block: `longest` if given (every push, release
    and requeue pushes to the wake-up list), else `timeout`."""
    return timeout if longest is None else max(timeout, longest)


class RedisWaiting:
    """RedisStore's `wait` and `wait_and_claim` (a mixin of RedisStore)."""

    prefix: str

    if TYPE_CHECKING:  # the store's own
        @property
        def client(self) -> Redis: ...

        def key(self, *parts: str) -> str: ...
        def _claim_args(self, token: str, queues: Sequence[str], worker: str, limit: int
                        ) -> list[Any]: ...
        def _limited(self, queues: Sequence[str]) -> dict | None: ...

    @guarded
    def wait(
        self, queues: Sequence[str], timeout: float, stop: threading.Event, *,
        longest: float | None = None,
    ) -> None:
        """Block on the queues' wake-up lists until a push, a delayed job falls due,
        `timeout` (or `longest`: pushes, releases and requeues all wake the list)
        passes or `stop` is set."""
        self._wait(queues, _longer(timeout, longest), stop, None)

    @guarded
    def wait_and_claim(
        self, queues: Sequence[str], worker: str, limit: int, timeout: float,
        stop: threading.Event, *, fresh_within: float, longest: float | None = None,
    ) -> list[Claim]:
        """Wait as `wait` does, with a CLAIM pipelined behind each blocking pop.

        Redis runs a blocked client's next command as soon as the pop returns, so
        a push wakes the worker with its job already claimed: one round trip from
        the wake-up to the job instead of two. Each CLAIM is dated when its pop
        was sent: a pop blocks at most `fresh_within` seconds (and a server tick).
        """
        timeout = _longer(timeout, longest)
        if limit < 1 or self._limited(queues) is not None:
            # A limited claim does not ride behind the pop: the worker claims next.
            self._wait(queues, timeout, stop, None)
            return []
        return self._wait(queues, timeout, stop, (worker, limit), max(0.001, fresh_within))

    def _wait(
        self, queues: Sequence[str], timeout: float, stop: threading.Event,
        claim: tuple[str, int] | None, fresh_within: float = _MAX_BLOCK,
    ) -> list[Claim]:
        if stop.is_set() or not queues:
            return []
        client = self.client
        pipe = client.pipeline(transaction=False)
        for queue in queues:
            pipe.zrange(self.key("queue", queue, "delayed"), 0, 0, withscores=True)
        earliest = [entries[0][1] for entries in pipe.execute() if entries]
        block = float(timeout)
        due_in = None
        if earliest:
            due_in = (min(earliest) - us(timezone.now())) / 1_000_000
            block = min(block, due_in)
        socket_timeout = client.connection_pool.connection_kwargs.get("socket_timeout")
        limit = min(_MAX_BLOCK, fresh_within)
        if socket_timeout:
            limit = min(limit, socket_timeout / 2)
        keys = [self.key("queue", queue, "wake") for queue in queues]
        deadline = time.monotonic() + block
        # Redis times out blocked clients on its server clock tick (100 ms at the
        # default hz 10): block there until just before a due job, then sleep here.
        blpop_until = deadline - (_SERVER_TICK if due_in is not None and due_in == block else 0)
        while not stop.is_set():
            left = blpop_until - time.monotonic()
            if left < 0.001:
                stop.wait(max(0.0, deadline - time.monotonic()))
                return []
            # BLPOP's timeout 0 means forever; `left` is at least a millisecond here.
            if claim is None:
                if client.blpop(keys, timeout=min(left, limit)) is not None:
                    return []
                continue
            woken, claims = self._pop_and_claim(keys, min(left, limit), queues, *claim)
            if woken or claims:
                return claims
        return []

    def _pop_and_claim(
        self, keys: Sequence[str], timeout: float, queues: Sequence[str], worker: str, limit: int
    ) -> tuple[bool, list[Claim]]:
        """BLPOP the wake-up lists with a CLAIM behind it in one pipeline; say whether
        the pop was woken, and return the claims."""
        token = uuid.uuid4().hex
        pipe = self.client.pipeline(transaction=False)
        pipe.blpop(keys, timeout=timeout)
        args = [self.prefix, *self._claim_args(token, queues, worker, limit)]
        queued = {1: calls.add(pipe, "CLAIM", args)}
        popped, rows = calls.finish(self.client, pipe.execute(raise_on_error=False), queued)
        return popped is not None, claims_from_rows(rows, token)
