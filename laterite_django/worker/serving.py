"""When a web server's process starts and stops the `worker` mode's threads.

They start when the process starts serving: at its first request, at the
ASGI lifespan's start-up (`with_worker_threads`) or at gunicorn's
`post_worker_init` (`gunicorn.conf.py`); a push starts them too. Never in a
management command that serves nothing, nor for the test client. They stop
when the process ends: at exit (threads.py), at the ASGI lifespan's
shutdown, at gunicorn's `worker_exit`, and from a SIGTERM/SIGINT/SIGQUIT
handler chained before the server's own.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import threading
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from django.db import connections

from ..conf import settings
from . import threads

__all__ = [
    "install_signal_hooks",
    "on_request_started",
    "post_worker_init",
    "start_serving",
    "with_worker_threads",
    "worker_exit",
]

logger = logging.getLogger("laterite")

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

STOP_SIGNALS = ("SIGTERM", "SIGINT", "SIGQUIT")


def start_serving() -> None:
    """Start the worker threads if LATERITE_QUEUE_MODE is "worker" (once per process)."""
    if settings.MODE != "worker":
        return
    threads.ensure_started()
    install_signal_hooks()


def on_request_started(sender: object, **kwargs: object) -> None:
    """A request reached this process: it serves, so its worker threads run."""
    if threads.running_here():
        return
    if getattr(sender, "__module__", "") == "django.test.client":
        return  # the test client: the test runner is no web server
    start_serving()


# -- gunicorn hooks: `from laterite_django.worker.serving import post_worker_init, worker_exit`
# in gunicorn.conf.py.


def post_worker_init(worker: object) -> None:
    """gunicorn hook: start the threads as each worker process boots, before any request."""
    start_serving()


def worker_exit(server: object, worker: object) -> None:
    """gunicorn hook: stop the threads as a worker process leaves (exit does it too)."""
    threads.stop_all()


# -- ASGI -------------------------------------------------------------------------------


def with_worker_threads(application: ASGIApp) -> ASGIApp:
    """Wrap an ASGI application (Django's has no lifespan of its own) so the server's
    lifespan starts the worker threads at start-up and stops them at shutdown.

    uvicorn ends its process by raising the stop signal again once its shutdown
    is done, so exit handlers never run there: the lifespan's shutdown is where
    the jobs in hand go back to their queues.
    """

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "lifespan":
            await application(scope, receive, send)
            return
        await _lifespan(receive, send)

    return app


async def _lifespan(receive: Receive, send: Send) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            try:
                start_serving()
            except Exception as e:
                await send({"type": "lifespan.startup.failed", "message": str(e)})
                return
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            try:
                await asyncio.get_running_loop().run_in_executor(None, _stop_in_thread)
            except Exception as e:
                await send({"type": "lifespan.shutdown.failed", "message": str(e)})
                return
            await send({"type": "lifespan.shutdown.complete"})
            return


def _stop_in_thread() -> None:
    try:
        threads.stop_all()
    finally:
        connections.close_all()


# -- exit and signals -------------------------------------------------------------------

_hooked_pid: int | None = None
_previous: dict[int, Any] = {}


def install_signal_hooks() -> None:
    """Chain a handler before the server's own for each stop signal, once per process.

    Python sets handlers from the main thread only: elsewhere (a threaded
    server's request) nothing is chained, and exit stops the threads.
    """
    global _hooked_pid
    if _hooked_pid == os.getpid() or threading.current_thread() is not threading.main_thread():
        return
    _hooked_pid = os.getpid()
    for name in STOP_SIGNALS:
        signum = getattr(signal, name)
        current = signal.getsignal(signum)
        if current is _on_stop_signal or current in (signal.SIG_IGN, None):
            continue  # ours already, ignored on purpose, or not set from Python
        _previous[signum] = current
        signal.signal(signum, _on_stop_signal)


def _on_stop_signal(signum: int, frame: Any) -> None:
    """Chained before the server's own handler (or the default action)."""
    previous = _previous.get(signum, signal.SIG_DFL)
    if previous is signal.default_int_handler:
        # Ctrl-C raises KeyboardInterrupt, which may be caught: if it ends the
        # process, the exit handler stops the threads.
        previous(signum, frame)
    elif callable(previous):
        # The server's handler: it shuts down and the process exits. The threads
        # finish their jobs meanwhile; exit (or the lifespan) waits for them.
        threads.begin_shutdown(final=True)
        previous(signum, frame)
    else:
        # The default action ends the process at once: stop the threads first.
        threads.stop_all()
        signal.signal(signum, signal.SIG_DFL)
        signal.raise_signal(signum)
