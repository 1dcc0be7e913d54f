"""`queue_work --metrics-port PORT`: one `/metrics` for a supervisor and its workers.

prometheus-client's own WSGI server, in a daemon thread of the serving process (the
supervisor, or the worker when it runs alone). A worker process forked later must
not keep the listening socket open (it would hold the port after the supervisor
ended): the socket is closed in every child right after the fork.
"""

from __future__ import annotations

import logging

from prometheus_client import CollectorRegistry, start_http_server

from ..core.served import closed_in_forked_children, stop_serving
from .collector import JobsCollector, QueueCollector
from .totals import Totals

__all__ = ["MetricsServer"]

logger = logging.getLogger("laterite")

class MetricsServer:
    """Serve `totals` and the queue gauges on `address`, `port` (0: any free port, see
    `.port`); the default address is every IPv4 address of the host."""

    def __init__(self, port: int, totals: Totals, *, address: str = "0.0.0.0") -> None:
        self.totals = totals
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(JobsCollector(totals))
        self.registry.register(QueueCollector())
        self._server, self._thread = start_http_server(
            port, addr=address or "0.0.0.0", registry=self.registry)
        self.port: int = self._server.server_address[1]
        closed_in_forked_children(self._server)
        host = f"[{address}]" if ":" in address else address or "0.0.0.0"
        logger.info("Serving metrics on %s:%d (/metrics)", host, self.port,
                    extra={"action": "metrics_serving", "address": address, "port": self.port})

    def close(self) -> None:
        """Stop serving and free the port."""
        stop_serving(self._server, self._thread)


