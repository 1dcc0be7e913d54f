"""Small process helpers shared by the harness's pieces: free ports, waiting."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable

__all__ = ["free_port", "wait_until"]


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nothing listens on at `host` now."""
    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def wait_until(predicate: Callable[[], object], timeout: float, what: str,
               every: float = 0.05) -> object:
    """Poll `predicate` until it returns something truthy; raise after `timeout` s."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            value = predicate()
        except Exception:
            value = None
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not ready after {timeout} s")
        time.sleep(every)
