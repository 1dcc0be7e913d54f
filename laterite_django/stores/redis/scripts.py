"""The one runner of the Redis store's Lua scripts: each loaded by name from lua/, run
by its SHA, alone or several together.

A script is the file lua/<name>.lua, called by that name (`run(client, "claim", ...)`,
or the store's `self._run("claim", ...)`). A line `--!include _<piece>.lua`
puts that shared piece in its place (once per script: the key helpers of
_common.lua, the push of _push_jobs.lua, the claim of _claim.lua...), and `${NAME}`
stands for the constant CONSTANTS[NAME]. Every script takes the key prefix as
ARGV[1] (see keys.py) and no KEYS, except on a Redis Cluster: there the prefix is a
hash tag (`{laterite}`, cluster.py) and each call declares it as its one key too, so
that a call that reaches a node not serving its slot is answered MOVED (the store
then looks the slot's primary up again) rather than run there.

Each script call is one `EVALSHA`: one round trip. A script is loaded only when
Redis answers NOSCRIPT (its first use on that server, a restart, SCRIPT FLUSH),
then the call is made again. redis-py's own `Script` objects would instead ask
`SCRIPT EXISTS` before every pipeline that holds one: one more round trip on
each claim of a busy worker (a DELETE and a CLAIM in one pipeline).

A lone call is sent on a connection of the client's pool and its answer read
there (`_send`): redis-py's `execute_command` less what it wraps around every
call (a retry closure, its observability records, the response callbacks, of
which EVALSHA has none), about a fifth of the CPU of a push. Several calls in
one round trip go the same way, in one packet (`together`), about 50 us fewer
than redis-py's pipeline per round trip on this project's bench machine. The
main thread keeps its connection rather than borrowing one per call (`_kept`).
Commands are packed by hiredis's `pack_command` where redis-py would pack them
the same way (`_packed`): redis-py's own packing passes each argument through
its encoder first, about 10 us for a push's twelve arguments, against 1.5.
A connection lost on the way is handed back to `execute_command` (or a
pipeline), which retries as it always does; a push is then sent again saying so,
and stores nothing twice (`run_push`, resend.py), and a claim sent again says
so too, and answers with the jobs its first run took (`run_claim`, `claim_again`)
rather than take more and leave those held until their claim is found abandoned.
"""

from __future__ import annotations

import hashlib
import os
import re
import threading
from collections.abc import Callable, Mapping, Sequence
from importlib import resources
from typing import TYPE_CHECKING, Any

from ...core.history import KEEP_FIRST, KEEP_LAST
from ..schedule_state import REMOVED
from . import resend
from .keys import CANDIDATES, IDLE_TOKEN_TTL, ONCE_TTL, SENT_TTL, WAKE_CAP

if TYPE_CHECKING:
    from redis import Redis
    from redis.connection import Connection, ConnectionPool

try:
    from redis.exceptions import ConnectionError as RedisConnectionError
    from redis.exceptions import NoScriptError, ResponseError
    from redis.exceptions import TimeoutError as RedisTimeoutError
except ImportError:  # pragma: no cover - the redis store then refuses to start

    class NoScriptError(Exception):  # type: ignore[no-redef]
        """Stands in for redis-py's, which is not installed."""

    RedisConnectionError = RedisTimeoutError = ResponseError = NoScriptError  # type: ignore[misc,assignment]

try:
    from hiredis import pack_command as _hiredis_pack
except ImportError:  # pragma: no cover - hiredis is in the `redis` extra
    _hiredis_pack = None  # type: ignore[assignment]


__all__ = ["SHAS", "SOURCES", "borrow", "claim_again", "evalsha", "finish",
           "load_and_run", "run", "run_claim", "run_claim_again", "run_push",
           "run_push_replicated", "together"]

# What a script's `${NAME}` stands for (see the module docstring).
CONSTANTS = {
    "WAKE_CAP": WAKE_CAP, "IDLE_TOKEN_TTL": IDLE_TOKEN_TTL, "ONCE_TTL": ONCE_TTL,
    "SENT_TTL": SENT_TTL, "CANDIDATES": CANDIDATES, "REMOVED": REMOVED,
    "KEEP_FIRST": KEEP_FIRST, "KEEP_LAST": KEEP_LAST,
}
_INCLUDE = re.compile(r"^--!include (\S+)\n", re.M)
_CONSTANT = re.compile(r"\$\{(\w+)\}")


def _read(name: str, included: set[str]) -> str:
    """The text of lua/`name`, its includes in place (each piece once per script)."""
    def include(match: re.Match[str]) -> str:
        piece = match.group(1)
        if piece in included:
            return ""
        included.add(piece)
        return _read(piece, included)

    return _INCLUDE.sub(include, (_LUA / name).read_text(encoding="utf-8"))


def source(name: str) -> str:
    """The Lua source of script `name` (lua/<name>.lua), as sent to Redis."""
    return _CONSTANT.sub(lambda m: str(CONSTANTS[m.group(1)]), _read(f"{name}.lua", set()))


_LUA = resources.files(__package__) / "lua"
# Script name -> Lua source, and -> the SHA1 that EVALSHA names it by: every script
# of lua/ (a file whose name starts with _ is a piece that scripts include).
SOURCES: dict[str, str] = {
    entry.name[:-4]: source(entry.name[:-4]) for entry in _LUA.iterdir()
    if entry.name.endswith(".lua") and not entry.name.startswith("_")
}
SHAS: dict[str, str] = {
    name: hashlib.sha1(text.encode(), usedforsecurity=False).hexdigest()
    for name, text in SOURCES.items()
}


# The main thread's kept connection per pool: id(pool) -> (pool, pid, connection).
_KEPT: dict[int, tuple[ConnectionPool, int, Connection]] = {}
_MAIN = threading.main_thread()


def evalsha(name: str, args: Sequence[Any], verb: str = "EVALSHA") -> tuple[Any, ...]:
    """The call of script `name` with `args` (the prefix first), as sent: a prefix that
    is a hash tag (a Redis Cluster's, cluster.py) is declared as the call's key."""
    head = SHAS[name] if verb == "EVALSHA" else SOURCES[name]
    if args[0][:1] == "{":
        return (verb, head, 1, args[0], *args)
    return (verb, head, 0, *args)


def run(client: Redis, name: str, args: Sequence[Any]) -> Any:
    """Run script `name` with `args` (the prefix first): one round trip."""
    try:
        return _send(client, evalsha(name, args))
    except NoScriptError:
        return load_and_run(client, name, args)


def run_push(client: Redis, name: str, args: Sequence[Any]) -> Any:
    """Run push script `name` (PUSH, PUSH_ONE, PUSH_LIMITED) with `args` (the prefix
    first) and its sender's (resend.py): if the answer is lost, the push is sent
    again saying so, and answers with the ids it stored the first time."""
    sender, number = resend.next_push()
    call = evalsha(name, args)
    try:
        return _send(client, (*call, sender, number, "0"), (*call, sender, number, "1"))
    except NoScriptError:
        return load_and_run(client, name, (*args, sender, number, "1"))


# Where a claim script (CLAIM, CLAIM_LIMITED) takes its `again` flag among its
# arguments, the prefix first (see lua/_claim.lua).
_AGAIN = 5


def claim_again(args: Sequence[Any]) -> list[Any]:
    """A claim script's `args` (the prefix first), as sent again after its answer was
    lost: the script then answers with the jobs its first run took, if it ran."""
    again = list(args)
    if again[_AGAIN] != "0":
        raise ValueError(f"Not a claim's arguments: {again[:_AGAIN + 1]!r}")
    again[_AGAIN] = "1"
    return again


def run_claim(client: Redis, name: str, args: Sequence[Any]) -> Any:
    """Run claim script `name` (CLAIM, CLAIM_LIMITED) with `args` (the prefix first):
    if the answer is lost, the claim is sent again saying so (`claim_again`)."""
    again = claim_again(args)
    try:
        return _send(client, evalsha(name, args), evalsha(name, again))
    except NoScriptError:
        return load_and_run(client, name, again)


def run_claim_again(client: Redis, name: str, args: Sequence[Any]) -> Any:
    """Send claim script `name` with `args` again, its first answer lost on a
    connection of its own (an idle worker's long pop, wait.py): the jobs its first
    run took, or a claim made now if it never ran."""
    again = claim_again(args)
    try:
        return client.execute_command(*evalsha(name, again))
    except NoScriptError:
        return load_and_run(client, name, again)


def _send(client: Redis, command: tuple[Any, ...], again: tuple[Any, ...] | None = None
          ) -> Any:
    """Send `command` on a pooled connection and return its answer (see the module
    docstring); a client of a single connection goes through `execute_command`.
    If the connection is lost, `again` (by default `command`) goes there instead."""
    answer = _talk(client, lambda connection: (
        connection.send_packed_command([_packed(connection, command)]),
        connection.read_response())[1])
    if answer is _LOST:
        # Sent or not, as redis-py's own retry would after this error: it retries and
        # says what it finds.
        return client.execute_command(*(again or command))
    return answer


def together(client: Redis, commands: Sequence[tuple[Any, ...]],
             again: Sequence[tuple[Any, ...]] | None = None) -> list[Any]:
    """Send `commands` in one packet and return their answers in order, an error
    answer as its exception, as `pipe.execute(raise_on_error=False)` would: on the
    connection `_send` uses, without the pipeline's per-call wrapping. It is the
    path from a woken pop to its claim (wait.py). A client of a single
    connection, or a connection lost on the way, goes through a pipeline, which
    retries as it always does, with `again` (by default `commands`)."""
    answers = _talk(client, lambda connection: (
        connection.send_packed_command([b"".join(_packed(connection, c) for c in commands)]),
        [_answer(connection) for _ in commands])[1])
    if answers is _LOST:
        pipe = client.pipeline(transaction=False)
        for command in again or commands:
            pipe.execute_command(*command)
        return pipe.execute(raise_on_error=False)
    return answers


# What `_talk` returns when the call is for redis-py to make (and retry) instead.
_LOST = object()


def _talk(client: Redis, exchange: Callable[[Connection], Any]) -> Any:
    """Run `exchange` (send, then read every answer) on the main thread's kept
    connection, or one borrowed in another thread; `_LOST` for a client of a single
    connection, or when the connection was lost on the way."""
    if getattr(client, "connection", None) is not None:
        return _LOST
    pool = client.connection_pool
    kept = _kept(pool) if threading.current_thread() is _MAIN else None
    connection = borrow(pool) if kept is None else kept
    try:
        return exchange(connection)
    except (RedisConnectionError, RedisTimeoutError):
        connection.disconnect()
        return _LOST
    except ResponseError:
        raise  # an answer, read whole (NOSCRIPT, an error raised by the script)
    except BaseException:
        # Stopped between the send and an answer (a signal's exception): an answer
        # may be left unread, so the connection is closed rather than used again.
        connection.disconnect()
        raise
    finally:
        if kept is None:
            pool.release(connection)


def _packed(connection: Connection, command: tuple[Any, ...]) -> bytes:
    """`command` in Redis's protocol, as `connection.pack_command` would pack it.

    hiredis packs str (as UTF-8), bytes, int and float as redis-py's encoder does
    with its default encoding; anything else (None, a bool, which redis-py
    refuses with a DataError naming it), another encoding, or a first argument
    redis-py would split at its spaces goes to redis-py.
    """
    encoder = connection.encoder
    if (_hiredis_pack is not None and encoder.encoding == "utf-8"
            and encoder.encoding_errors == "strict" and " " not in command[0]):
        try:
            return _hiredis_pack(command)
        except TypeError:
            pass
    return b"".join(connection.pack_command(*command))


def _answer(connection: Connection) -> Any:
    """The next answer on `connection`; an error answer (read whole) as its exception."""
    try:
        return connection.read_response()
    except ResponseError as e:
        return e


def borrow(pool: ConnectionPool) -> Connection:
    """A connection of `pool`, to give back with `pool.release`."""
    try:
        return pool.get_connection()
    except TypeError:  # redis-py before 5.3 asks for the command's name
        return pool.get_connection("EVALSHA")


def _kept(pool: ConnectionPool) -> Connection:
    """The connection of `pool` that the main thread keeps for its lone calls.

    Borrowing a connection costs a pool lock and a poll of its socket, a tenth of
    a push's CPU. The main thread (a script, a management command, a worker, a
    web server's single-threaded process) lives as long as the process, so it
    keeps one connection per pool instead; other threads, which may be many and
    short-lived, borrow and give back. A forked child takes one of its own.
    """
    entry = _KEPT.get(id(pool))
    pid = os.getpid()
    if entry is not None and entry[0] is pool and entry[1] == pid:
        return entry[2]
    connection = borrow(pool)
    _KEPT[id(pool)] = (pool, pid, connection)
    return connection


def load_and_run(client: Redis, name: str, args: Sequence[Any]) -> Any:
    client.execute_command("SCRIPT LOAD", SOURCES[name])
    return client.execute_command(*evalsha(name, args))


def finish(
    client: Redis, results: list[Any], calls: Mapping[int, tuple[str, Sequence[Any]]],
    ran_late: list[int] | None = None,
) -> list[Any]:
    """Check the answers of `together` (or `pipe.execute(raise_on_error=False)`).

    `calls` maps the position of each script call among them to its name and
    arguments. A script Redis did not know did not run: it is loaded and run on
    its own, after the pipeline (the scripts so run keep their order), and its
    position is added to `ran_late` if given: the steps after it in the pipeline
    ran before it, without what it writes (a CLAIM behind a FINISH misses the next
    link of a chain), so such a caller can make them again. Any other error is
    raised.
    """
    for index, result in enumerate(results):
        if isinstance(result, NoScriptError) and index in calls:
            results[index] = load_and_run(client, *calls[index])
            if ran_late is not None:
                ran_late.append(index)
        elif isinstance(result, Exception):
            raise result
    return results


def run_push_replicated(client: Redis, name: str, args: Sequence[Any], timeout: float
                        ) -> tuple[Any, int]:
    """Run push script `name` as `run_push` does, then `WAIT 1`, on one connection;
    return its answer and how many replicas confirmed its writes.

    WAIT counts the replicas that have every write made on its own connection, so
    the script and the WAIT go in one pipeline. The pipeline may be sent twice (its
    answer lost; the script unknown to Redis, then sent with its source), so the
    push always says it may have run before (resend.py).
    """
    sender, number = resend.next_push()
    tail = (*args, sender, number, "1")
    result, replicas = _with_wait(client, evalsha(name, tail), timeout)
    if isinstance(result, NoScriptError):
        result, replicas = _with_wait(client, evalsha(name, tail, "EVAL"), timeout)
    for answer in (result, replicas):
        if isinstance(answer, Exception):
            raise answer
    return result, int(replicas)


def _with_wait(client: Redis, command: tuple[Any, ...], timeout: float) -> list[Any]:
    """`command` then `WAIT 1` in one pipeline, sent once more if the connection is
    lost on the way; their answers, an error answer as its exception."""
    def send() -> list[Any]:
        pipe = client.pipeline(transaction=False)
        pipe.execute_command(*command)
        pipe.execute_command("WAIT", 1, max(1, round(timeout * 1000)))
        return pipe.execute(raise_on_error=False)

    try:
        return send()
    except (RedisConnectionError, RedisTimeoutError):
        return send()  # sent or not: the push says it may have run before
