"""`cx.iterate`'s cursors saved by the PostgreSQL store without waiting between chunks:
the UPDATE sent on a connection of its own (libpq's asynchronous calls, through psycopg's
`pgconn`), its answer read before the next chunk's items are handed on
(resumable.CursorWriter). As postgres.SAVE_CURSOR: by the job's id under its token, the
commit not waiting for the WAL flush."""

from __future__ import annotations

import select
from collections.abc import Callable
from typing import Any

from django.db import DatabaseError

from ...core.values import Claim
from .sql import TABLE

__all__ = ["PostgresCursorSender"]

# Seconds between two looks at the answer's socket (select returns as soon as it reads).
WAIT_STEP = 1.0
# libpq's PGRES_COMMAND_OK: a statement that returns no rows ran.
COMMAND_OK = 1
# Params: checkpoint text, id, token (as postgres.SAVE_CURSOR, in libpq's $n form).
SEND_CURSOR = (f"UPDATE {TABLE} SET checkpoint = $1 WHERE id = $2 AND token = $3 "
               f"AND set_config('synchronous_commit', 'off', true) IS NOT NULL").encode()


class PostgresCursorSender:
    """Sends the saves of one claim's cursors on a connection of its own, made by
    `connect` (with the parameters of the store's, autocommit) at the first save and
    closed at `close`."""

    def __init__(self, connect: Callable[[], Any], claim: Claim) -> None:
        self._connect = connect
        self._claim = claim
        self._connection: Any = None

    def send(self, text: str) -> Callable[[], bool]:
        """Send the save of `text`; the function returned reads its answer (True: the
        claim was held, the cursor saved)."""
        if self._connection is None:
            self._connection = self._connect()
        pgconn = self._connection.pgconn
        claim = self._claim
        pgconn.send_query_params(SEND_CURSOR, [text.encode(), str(claim.id).encode(),
                                               claim.token.encode()])

        def answer() -> bool:
            # Waited for on the socket, not in libpq's blocking call: that one keeps the
            # interpreter's lock, and the worker's other threads (the heartbeat, whose
            # transaction may hold the job's row lock the UPDATE waits for) need it.
            pgconn.consume_input()
            while pgconn.is_busy():
                select.select([pgconn.socket], [], [], WAIT_STEP)
                pgconn.consume_input()
            found = pgconn.get_result()
            while pgconn.get_result() is not None:
                pass
            if found is None or found.status != COMMAND_OK:
                message = found.error_message.decode(errors="replace") if found else ""
                raise DatabaseError(f"the cursor's save failed: {message}")
            return found.command_tuples == 1

        return answer

    def close(self) -> None:
        """Close the connection (an answer left unread goes with it)."""
        connection, self._connection = self._connection, None
        if connection is not None:
            connection.close()
