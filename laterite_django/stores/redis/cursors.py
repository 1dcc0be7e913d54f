"""`cx.iterate`'s cursors saved by the Redis store without waiting between chunks: the
SAVE_CHECKPOINT script sent on a connection of its own, its answer read before the next
chunk's items are handed on (resumable.CursorWriter)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ...core.values import Claim
from . import scripts as calls

if TYPE_CHECKING:
    from redis import Redis

__all__ = ["RedisCursorSender"]


class RedisCursorSender:
    """Sends the saves of one claim's cursors on a connection taken from the client's pool
    for the walk (one answer pending at most), given back at `close`."""

    def __init__(self, client: Redis, prefix: str, claim: Claim) -> None:
        self._client = client
        self._prefix = prefix
        self._claim = claim
        self._connection: Any = None
        self._pending = False

    def send(self, text: str) -> Callable[[], bool]:
        """Send the save of `text`; the function returned reads its answer (True: the
        claim was held, the cursor saved)."""
        claim = self._claim
        args = [self._prefix, claim.id, claim.token, text]
        if self._connection is None:
            # The first save the usual way: the script is then loaded on the server.
            saved = bool(calls.run(self._client, "save_checkpoint", args))
            self._connection = calls.borrow(self._client.connection_pool)
            return lambda: saved
        connection = self._connection
        self._pending = True
        connection.send_command(*calls.evalsha("save_checkpoint", args))

        def answer() -> bool:
            found = connection.read_response()
            self._pending = False
            return bool(found)

        return answer

    def close(self) -> None:
        """Give the connection back (dropped if an answer was left unread)."""
        connection, self._connection = self._connection, None
        if connection is None:
            return
        if self._pending:
            connection.disconnect()
        self._client.connection_pool.release(connection)
