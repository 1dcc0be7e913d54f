"""`queue_work --health-port PORT`: `/livez` and `/readyz` for Kubernetes probes.

`/livez` answers 200 while the process's loop turns: the worker's heartbeat thread
(it turns about once a second whatever the running job does) or the supervisor's
loop (every 0.1 s) turned within `LIVE_WITHIN` seconds; 503 otherwise. While the
command still waits for its store to answer at start-up, it answers 200: the
process is alive, only not ready.

`/readyz` answers 200 while the store answers a ping (one cheap round trip per
probe, on a connection of the probe's own that is closed after it), 503 with the
store's error otherwise: a probe sees an outage at its first look, and the
recovery at its first look after the store is back.

A standard-library HTTP server in a daemon thread, one thread per request, so a
ping that hangs on an unreachable store never holds up `/livez`. A worker process
forked later closes the listening socket, as the metrics server's do.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from threading import Thread

from django.db import connections

from ..core.served import closed_in_forked_children, stop_serving
from ..stores import Store, get_store

__all__ = ["LIVE_WITHIN", "HealthServer"]

logger = logging.getLogger("laterite")

# Seconds without a turn of the loop after which /livez says the process is stuck.
LIVE_WITHIN = 60.0

def starting() -> str | None:
    """What `alive` says before the loop runs: nothing wrong."""
    return None


class HealthServer:
    """Serve /livez and /readyz on `address`, `port` (0: any free port, see `.port`).

    `alive` returns None while the process's loop turns, else why not; it is set
    once the loop exists (`watch`). `store` is the store pinged by /readyz."""

    def __init__(self, port: int, *, address: str = "0.0.0.0",
                 store: Callable[[], Store] = get_store) -> None:
        self.alive: Callable[[], str | None] = starting
        self.store = store
        self._server = ThreadingHTTPServer((address or "0.0.0.0", port), _Handler)
        self._server.daemon_threads = True
        self._server.health = self  # type: ignore[attr-defined]
        self._thread = Thread(target=self._server.serve_forever, name="laterite-health",
                              daemon=True)
        self._thread.start()
        self.port: int = self._server.server_address[1]
        closed_in_forked_children(self._server)
        host = f"[{address}]" if ":" in address else address or "0.0.0.0"
        logger.info("Serving health probes on %s:%d (/livez, /readyz)", host, self.port,
                    extra={"action": "health_serving", "address": address, "port": self.port})

    def watch(self, alive: Callable[[], str | None]) -> None:
        """From now on, /livez asks `alive`."""
        self.alive = alive

    def live(self) -> str | None:
        try:
            return self.alive()
        except Exception as e:  # a probe never raises: it says what it found
            return f"cannot tell: {e}"

    def ready(self) -> str | None:
        """None if the store answers a ping, else its error."""
        store = self.store()
        try:
            store.ping()
            return None
        except Exception as e:
            return str(e) or type(e).__name__
        finally:
            # This request's thread ends now: close what it opened.
            for conn in connections.all(initialized_only=True):
                with contextlib.suppress(Exception):
                    conn.close()

    def close(self) -> None:
        """Stop serving and free the port."""
        stop_serving(self._server, self._thread)


class _Handler(BaseHTTPRequestHandler):
    server_version = "laterite-health"

    def do_GET(self) -> None:
        health: HealthServer = self.server.health  # type: ignore[attr-defined]
        path = self.path.split("?", 1)[0]
        if path == "/livez":
            self._answer(health.live())
        elif path == "/readyz":
            self._answer(health.ready())
        else:
            self._send(404, "not found: try /livez or /readyz\n")

    do_HEAD = do_GET

    def _answer(self, problem: str | None) -> None:
        if problem is None:
            self._send(200, "ok\n")
        else:
            self._send(503, f"{problem}\n")

    def _send(self, status: int, body: str) -> None:
        data = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def log_message(self, format: str, *args: object) -> None:
        """Probes come every few seconds: say nothing of them."""

