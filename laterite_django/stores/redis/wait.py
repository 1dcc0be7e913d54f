"""How an idle worker waits on Redis: blocked on its queues' wake-up lists, with the
claim pipelined behind the pop so a push wakes it with its job already claimed.

It blocks a second at a time, a claim behind each pop; once it has been idle as
long as a sweep interval (`quiet_after`), it looks whether it is quiet (`look`),
and again each such interval while it is not: the look reads the database too,
which a worker on Redis may have to connect to for it. A quiet worker blocks in one
pop until its next delayed job (at most QUIET_LONGEST), its claim dated by the
server when the pop returns, and sends nothing else meanwhile.

The quiet look: a worker idle for a moment looks, in one script (LOOK_IDLE), at what
a sweep or a claim of its own could find: a job due on its queues, a job claimed on
any queue, a batch's ends not yet counted; and, in the database, jobs left in the
outbox or a batch counted to 0 whose callbacks were not pushed. Finding none, it is
quiet: until its next delayed job, at most QUIET_LONGEST, it blocks on its queues'
wake-up lists and a list of its own, and sends nothing else. The script that finds
it quiet also enters its own list in `P:quiet`, in the same step; from then on the
next claim of any job, on any queue, pushes to that list (lua/_common.lua's
`wake_idle`), so a quiet worker sweeps again whenever a job is held somewhere, as
before. A quiet worker that is told to stop pushes to it itself, from another
connection, to end its pop (`wake_own`).
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from django.db import connections
from django.utils import timezone

from ...core.values import Claim
from ..base import QUIET_LONGEST
from . import scripts as calls
from .keys import IDLE_TOKEN_TTL
from .values import claim_args, us
from .values import claims as claims_from_rows

try:
    from redis.exceptions import ConnectionError as RedisConnectionError
    from redis.exceptions import NoScriptError
    from redis.exceptions import TimeoutError as RedisTimeoutError
except ImportError:  # pragma: no cover - the redis store then refuses to start
    NoScriptError = RedisTimeoutError = RedisConnectionError = Exception  # type: ignore[misc,assignment]

if TYPE_CHECKING:
    from redis import Redis

__all__ = ["QuietState", "Waiting"]

# The longest single blocking wait, so a stop request is seen within a second.
_MAX_BLOCK = 1.0

# How late Redis may time out a blocked client (one server tick at the default hz 10).
_SERVER_TICK = 0.1

# How long past its timeout a long pop's answer may come before the connection is
# taken for broken.
_ANSWER_LATE = 10.0

# What the database holds that a Redis store's sweep would act on: outbox rows that
# could not reach Redis at their commit, batches counted to 0 with callbacks unpushed.
_DATABASE_BUSY = (
    "SELECT EXISTS (SELECT 1 FROM laterite_outbox_job) "
    "OR EXISTS (SELECT 1 FROM laterite_batch WHERE pending <= 0 AND finished_at IS NULL)"
)


def _longer(timeout: float, longest: float | None) -> float:
    """How long an idle worker may block: `longest` if given (every push, release
    and requeue pushes to the wake-up list), else `timeout`."""
    return timeout if longest is None else max(timeout, longest)


class QuietState:
    """Per store: each thread's quiet spell, and since when its worker has been idle."""

    def __init__(self) -> None:
        self._local = threading.local()

    def idle_for(self, popped: float) -> float:
        """Seconds since this thread's worker found nothing: since the start of its first
        empty pop (of `popped` seconds, if the one just made) since it was woken, or
        since its last look."""
        since = getattr(self._local, "idle_since", None)
        now = time.monotonic()
        if since is None:
            self._local.idle_since = since = now - popped
        return now - since

    def busy(self) -> None:
        """Woken, or looked: idle from the next empty pop on."""
        self._local.idle_since = None

    def until(self) -> float | None:
        """When this thread's quiet spell ends (time.time()), None if it is not quiet."""
        until = getattr(self._local, "until", None)
        return until if until is not None and time.time() < until else None

    def begin(self, until: float) -> None:
        self._local.until = until

    def end(self) -> None:
        self._local.until = None


class Waiting:
    """How the idle workers of one RedisStore wait: on the keys under `prefix`, through
    the client `client()` returns (the store's), the quiet look reading `database`;
    each thread's quiet spell in `quiet_state`."""

    def __init__(self, prefix: str, database: str, client: Callable[[], Redis]) -> None:
        self.prefix = prefix
        self.database = database
        self._client = client
        self.quiet_state = QuietState()

    def _key(self, *parts: str) -> str:
        return ":".join((self.prefix, *parts))

    def quiet(self) -> bool:
        """This thread's worker looked, found itself quiet (`look`) and was woken by
        nothing since."""
        return self.quiet_state.until() is not None

    def wait(
        self, queues: Sequence[str], timeout: float, stop: threading.Event, *,
        longest: float | None = None,
    ) -> None:
        """Block on the queues' wake-up lists until a push, a delayed job falls due,
        `timeout` (or `longest`: pushes, releases and requeues all wake the list)
        passes or `stop` is set."""
        self._wait(queues, _longer(timeout, longest), stop, None)

    def wait_and_claim(
        self, queues: Sequence[str], worker: str, limit: int, timeout: float,
        stop: threading.Event, *, fresh_within: float, longest: float | None = None,
        quiet_after: float = 5.0,
    ) -> list[Claim]:
        """Wait as `wait` does, with a CLAIM pipelined behind each blocking pop (see
        RedisStore.wait_and_claim)."""
        return self._wait(queues, _longer(timeout, longest), stop, (worker, limit),
                          max(0.001, fresh_within),
                          quiet_after=None if longest is None else quiet_after)

    def _wait(
        self, queues: Sequence[str], timeout: float, stop: threading.Event,
        claim: tuple[str, int] | None, fresh_within: float = _MAX_BLOCK,
        quiet_after: float | None = None,
    ) -> list[Claim]:
        if stop.is_set() or not queues:
            return []
        client = self._client()
        if claim is not None and quiet_after is not None and self.quiet():
            return self._quiet_wait(queues, timeout, stop, *claim)
        pipe = client.pipeline(transaction=False)
        for queue in queues:
            pipe.zrange(self._key("queue", queue, "delayed"), 0, 0, withscores=True)
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
        keys = [self._key("queue", queue, "wake") for queue in queues]
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
                if self.look(queues, claim[0], us(timezone.now())):
                    return []
        return []

    # -- the quiet look ----------------------------------------------------------

    def own_key(self, worker: str) -> str:
        """The wake-up list of worker `worker` alone (a broadcast of claims, or its stop)."""
        return self._key("worker", worker, "wake")

    def look(self, queues: Sequence[str], worker: str, now_us: int) -> bool:
        """Look once whether this thread's worker is quiet (the module docstring); if so,
        begin its quiet spell, until its next delayed job or QUIET_LONGEST from now."""
        quiet, earliest = calls.run(
            self._client(), "look_idle", [self.prefix, now_us, self.own_key(worker), *queues])
        if not int(quiet) or self._database_busy():
            return False
        until = time.time() + QUIET_LONGEST
        if earliest:
            until = min(until, int(earliest) / 1_000_000)
        self.quiet_state.begin(until)
        return True

    def _database_busy(self) -> bool:
        """Whether the database holds work for a sweep (outbox rows, unpushed callbacks)."""
        with connections[self.database].cursor() as cursor:
            cursor.execute(_DATABASE_BUSY)
            return bool(cursor.fetchone()[0])

    def wake_own(self, worker: str) -> None:
        """End the quiet pop of `worker` (it is stopping): a token on its own list."""
        key = self.own_key(worker)
        pipe = self._client().pipeline(transaction=False)
        pipe.rpush(key, "stop")
        pipe.expire(key, IDLE_TOKEN_TTL)
        pipe.execute()

    # -- the pops ----------------------------------------------------------------

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
        keys = [self._key("queue", queue, "wake") for queue in queues]
        keys.append(self.own_key(worker))
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
        The claim is dated by the server when it runs (lua/_claim.lua).
        If the answers are lost (the connection breaks, or the server is silent past
        the pop), the claim is sent again, saying so, on a pooled connection
        (`scripts.run_claim_again`): it answers with the jobs its first run took,
        or claims now if it never ran; the pop then counts as woken.
        """
        token = uuid.uuid4().hex
        args = [self.prefix, *claim_args(token, queues, worker, limit)]
        # Its first run may come as late as the pop's end: a claim sent again looks that
        # much further back.
        args[1] += int((block + _ANSWER_LATE) * 1_000_000)
        client = self._client()
        pool = client.connection_pool
        connection = calls.borrow(pool)
        try:
            connection.send_packed_command(connection.pack_commands([
                ("BLPOP", *keys, block), calls.evalsha("claim", args)]))
            # Past this, the server is taken for gone (a connection that broke silently).
            give_up = time.monotonic() + block + _ANSWER_LATE
            asked_to_stop = False
            while not connection.can_read(timeout=_MAX_BLOCK):
                if stop.is_set() and not asked_to_stop:
                    asked_to_stop = True
                    self.wake_own(worker)
                if time.monotonic() > give_up:
                    raise RedisTimeoutError(f"No answer to a BLPOP of {block:.1f} s")
            popped = connection.read_response()
            try:
                rows = connection.read_response()
            except NoScriptError:  # it did not run; sent once more, it says it may have
                rows = calls.load_and_run(client, "claim", calls.claim_again(args))
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
            rows = calls.run_claim_again(client, "claim", args)
        return popped is not None, claims_from_rows(rows, token)

    def _pop_and_claim(
        self, keys: Sequence[str], timeout: float, queues: Sequence[str], worker: str, limit: int
    ) -> tuple[bool, list[Claim]]:
        """BLPOP the wake-up lists with a CLAIM behind it in one packet; say whether
        the pop was woken, and return the claims."""
        token = uuid.uuid4().hex
        args = [self.prefix, *claim_args(token, queues, worker, limit)]
        again = calls.claim_again(args)  # its answer lost, the claim is sent again so
        client = self._client()
        answers = calls.together(client, *(
            [("BLPOP", *keys, timeout), calls.evalsha("claim", claim)]
            for claim in (args, again)))
        popped, rows = calls.finish(client, answers, {1: ("claim", again)})
        return popped is not None, claims_from_rows(rows, token)
