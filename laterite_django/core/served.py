"""HTTP servers a process runs in a daemon thread (the metrics server, the health
probes): a worker process forked later must not keep their listening sockets open
(it would hold the port after the serving process ended), so each is closed in
every child right after the fork."""

from __future__ import annotations

import contextlib
import os
import weakref
from socketserver import BaseServer
from threading import Thread

__all__ = ["closed_in_forked_children", "stop_serving"]

_serving: weakref.WeakSet[BaseServer] = weakref.WeakSet()


def closed_in_forked_children(server: BaseServer) -> None:
    """Close `server`'s listening socket in every process forked from now on."""
    _serving.add(server)


def stop_serving(server: BaseServer, thread: Thread) -> None:
    """Stop `server` (served by `thread`) and free its port."""
    _serving.discard(server)
    server.shutdown()
    server.server_close()
    thread.join(5)


def _after_fork_in_child() -> None:
    for server in list(_serving):
        with contextlib.suppress(OSError):
            server.socket.close()  # type: ignore[attr-defined]
    _serving.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
