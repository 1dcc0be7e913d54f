"""How an idle worker waits on Redis: blocked on its queues' wake-up lists, with the
claim pipelined behind the pop so a push wakes it with its job already claimed.

It blocks a second at a time, a claim behind each pop; once it has been idle as
long as a sweep interval (`quiet_after`), it looks whether it is quiet
(redis_quiet), and again each such interval while it is not: the look reads the
database too, which a worker on Redis may have to connect to for it. A quiet worker
blocks in one pop until its next delayed job (at most QUIET_LONGEST), its claim
dated by the server when the pop returns, and sends nothing else meanwhile.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from django.utils import timezone

from ...core.values import Claim
from ..errors import guarded
from . import idle as redis_quiet
from . import scripts as calls
from .values import claims as claims_from_rows
from .values import us

try:
    from redis.exceptions import ConnectionError as RedisConnectionError
    from redis.exceptions import NoScriptError
    from redis.exceptions import TimeoutError as RedisTimeoutError
except ImportError:  # pragma: no cover - the redis store then refuses to start
    NoScriptError = RedisTimeoutError = RedisConnectionError = Exception  # type: ignore[misc,assignment]

if TYPE_CHECKING:
    import threading

    from redis import Redis

    from ...core.limits import Limits

__all__ = ["RedisWaiting"]

# The longest single blocking wait, so a stop request is seen within a second.
_MAX_BLOCK = 1.0

# How late Redis may time out a blocked client (one server tick at the default hz 10).
_SERVER_TICK = 0.1

# How long past its timeout a long pop's answer may come before the connection is
# taken for broken.
_ANSWER_LATE = 10.0


def _longer(timeout: float, longest: float | None) -> float:
    """How long an idle worker may block: `longest` if given (every push, release
    and requeue pushes to the wake-up list), else `timeout`."""
    return timeout if longest is None else max(timeout, longest)


class RedisWaiting:
    """RedisStore's `wait` and `wait_and_claim` (a mixin of RedisStore)."""

    prefix: str
    quiet_state: redis_quiet.QuietState

    if TYPE_CHECKING:  # the store's own
        @property
        def client(self) -> Redis: ...

        def key(self, *parts: str) -> str: ...
        def _claim_args(self, token: str, queues: Sequence[str], worker: str, limit: int
                        ) -> list[Any]: ...
        def _limited(self, queues: Sequence[str], limits: Limits | None) -> dict | None: ...

    def quiet(self) -> bool:
        """This thread's worker looked, found itself quiet (redis_quiet) and was woken
        by nothing since."""
        return self.quiet_state.until() is not None

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
        quiet_after: float = 5.0, limits: Limits | None = None,
    ) -> list[Claim]:
        """Wait as `wait` does, with a CLAIM pipelined behind each blocking pop.

        Redis runs a blocked client's next command as soon as the pop returns, so
        a push wakes the worker with its job already claimed: one round trip from
        the wake-up to the job instead of two. Each CLAIM is dated when its pop
        was sent: a pop blocks at most `fresh_within` seconds (and a server tick).
        """
        timeout = _longer(timeout, longest)
        if limit < 1 or self._limited(queues, limits) is not None:
            # A limited claim does not ride behind the pop: the worker claims next.
            self._wait(queues, timeout, stop, None)
            return []
        return self._wait(queues, timeout, stop, (worker, limit), max(0.001, fresh_within),
                          quiet_after=None if longest is None else quiet_after)

    def _wait(
        self, queues: Sequence[str], timeout: float, stop: threading.Event,
        claim: tuple[str, int] | None, fresh_within: float = _MAX_BLOCK,
        quiet_after: float | None = None,
    ) -> list[Claim]:
        if stop.is_set() or not queues:
            return []
        client = self.client
        if claim is not None and quiet_after is not None and self.quiet():
            return self._quiet_wait(queues, timeout, stop, *claim)
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
            pop = min(left, limit)
            woken, claims = self._pop_and_claim(keys, pop, queues, *claim)
            if woken or claims:
                self.quiet_state.busy()
                return claims
            if quiet_after is not None and self.quiet_state.idle_for(pop) >= quiet_after:
                # Idle a sweep interval: look whether it may wait quiet. If so, the
                # worker's next wait is quiet, as long as the worker allows (Store.quiet).
                self.quiet_state.busy()  # not: the next look is an interval later
                if redis_quiet.look(self, queues, claim[0], us(timezone.now())):  # type: ignore[arg-type]
                    return []
        return []

    def _quiet_wait(
        self, queues: Sequence[str], timeout: float, stop: threading.Event, worker: str,
        limit: int,
    ) -> list[Claim]:
        """Block in one pop, a claim behind it, until woken (a push, a claim anywhere,
        a stop), `timeout` passes or the quiet spell ends; the spell ends when woken."""
        until = self.quiet_state.until()
        if until is None:
            return []
        seconds = min(timeout, until - time.time())
        # Redis times out a blocked client on its clock tick: sleep the last one here.
        block = seconds - _SERVER_TICK
        if block < 0.001:
            stop.wait(max(seconds, 0.0))
            return []
        keys = [self.key("queue", queue, "wake") for queue in queues]
        keys.append(redis_quiet.own_key(self, worker))  # type: ignore[arg-type]
        try:
            woken, claims = self._long_pop_and_claim(keys, block, stop, queues, worker, limit)
        except BaseException:
            self.quiet_state.end()
            raise
        if woken:
            self.quiet_state.end()
            self.quiet_state.busy()
            return claims
        left = until - time.time()
        if 0 < left <= _SERVER_TICK:
            stop.wait(left)  # the spell ends with its delayed job due: claimed next
        return claims

    def _long_pop_and_claim(
        self, keys: Sequence[str], block: float, stop: threading.Event,
        queues: Sequence[str], worker: str, limit: int,
    ) -> tuple[bool, list[Claim]]:
        """`_pop_and_claim` for a pop of any length, on a connection of its own.

        The answer is awaited here a second at a time (the client's socket timeout
        may be shorter than the pop), so a stop is seen: the worker then pushes to its
        own list, from another connection, which ends the pop; the claim behind it
        is returned unstarted by the caller. Cutting the connection instead could
        lose a claim made in that instant, counted as an attempt that never ran.
        The claim is dated by the server when it runs (see redis_scripts_push_claim.CLAIM_HEAD).
        If the answers are lost (the connection breaks, or the server is silent past
        the pop), the claim is sent again, saying so, on a pooled connection
        (`redis_calls.run_claim_again`): it answers with the jobs its first run took,
        or claims now if it never ran; the pop then counts as woken.
        """
        token = uuid.uuid4().hex
        args = [self.prefix, *self._claim_args(token, queues, worker, limit)]
        # Its first run may come as late as the pop's end: a claim sent again looks that
        # much further back.
        args[1] += int((block + _ANSWER_LATE) * 1_000_000)
        pool = self.client.connection_pool
        connection = calls.borrow(pool)
        try:
            connection.send_packed_command(connection.pack_commands([
                ("BLPOP", *keys, block), ("EVALSHA", calls.SHAS["claim"], 0, *args)]))
            # Past this, the server is taken for gone (a connection that broke silently).
            give_up = time.monotonic() + block + _ANSWER_LATE
            asked_to_stop = False
            while not connection.can_read(timeout=_MAX_BLOCK):
                if stop.is_set() and not asked_to_stop:
                    asked_to_stop = True
                    redis_quiet.wake_own(self, worker)  # type: ignore[arg-type]
                if time.monotonic() > give_up:
                    raise RedisTimeoutError(f"No answer to a BLPOP of {block:.1f} s")
            popped = connection.read_response()
            try:
                rows = connection.read_response()
            except NoScriptError:  # it did not run; sent once more, it says it may have
                rows = calls.load_and_run(self.client, "claim", calls.claim_again(args))
        except (RedisConnectionError, RedisTimeoutError):
            connection.disconnect()
            popped = lost = True
        except BaseException:
            connection.disconnect()  # an answer may be left unread
            raise
        else:
            lost = False
        finally:
            pool.release(connection)
        if lost:
            rows = calls.run_claim_again(self.client, "claim", args)
        return popped is not None, claims_from_rows(rows, token)

    def _pop_and_claim(
        self, keys: Sequence[str], timeout: float, queues: Sequence[str], worker: str, limit: int
    ) -> tuple[bool, list[Claim]]:
        """BLPOP the wake-up lists with a CLAIM behind it in one packet; say whether
        the pop was woken, and return the claims."""
        token = uuid.uuid4().hex
        args = [self.prefix, *self._claim_args(token, queues, worker, limit)]
        again = calls.claim_again(args)  # its answer lost, the claim is sent again so
        answers = calls.together(self.client, *(
            [("BLPOP", *keys, timeout), calls.evalsha("claim", claim)]
            for claim in (args, again)))
        popped, rows = calls.finish(self.client, answers, {1: ("claim", again)})
        return popped is not None, claims_from_rows(rows, token)
