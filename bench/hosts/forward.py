"""A plain TCP forwarder: the bridge's address to a service that listens on loopback.

PostgreSQL and Redis of the machine listen on 127.0.0.1 only; a simulated host
reaches them through this forwarder, bound on the bridge. It copies bytes and
nothing else (one server session per client connection, the server's own
process key passed through), so to a client it is a direct connection.
Runs in a daemon thread of the process that starts it.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading

__all__ = ["Forwarder"]


class Forwarder:
    """Forward connections to `listen`:`port` on to `target_host`:`target_port`."""

    def __init__(self, listen: str, port: int, target_host: str, target_port: int) -> None:
        self.listen, self.port = listen, port
        self.target = (target_host, target_port)
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="forwarder")
        self._server: asyncio.base_events.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()

    def start(self) -> Forwarder:
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError(f"forwarder on {self.listen}:{self.port} did not start")
        return self

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._server = self._loop.run_until_complete(
            asyncio.start_server(self._serve, self.listen, self.port))
        self._ready.set()
        self._loop.run_forever()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.target)
        except OSError:
            writer.close()
            return
        pair = {writer, up_writer}
        self._writers |= pair
        try:
            await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))
        finally:
            self._writers -= pair

    def stop(self) -> None:
        """Close the listener and every forwarded connection, then the event loop."""
        self._loop.call_soon_threadsafe(self._close_all)
        self._thread.join(10)
        self._loop.close()

    def _close_all(self) -> None:
        if self._server is not None:
            self._server.close()
        for writer in self._writers:
            writer.close()
        self._loop.stop()


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        with contextlib.suppress(Exception):
            writer.close()
