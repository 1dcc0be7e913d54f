"""A TCP proxy in front of the test Redis that can lose one answer: the command reaches
the server and runs, and its answer is dropped with the client's connection, as when a
connection breaks between a command and its reply (a network fault, a server's
`timeout`, a load balancer's reset)."""

from __future__ import annotations

import contextlib
import socket
import threading
from urllib.parse import urlsplit

__all__ = ["AnswerDropper"]


class AnswerDropper:
    """Forward every connection to the Redis at `url`; after `drop_answer_to(word)`,
    the answer to the next command sent that holds `word` (EVALSHA: a script call, not
    a connection's handshake) is not passed on, and that connection is closed."""

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        self._target = (parts.hostname or "127.0.0.1", parts.port or 6379)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"redis://127.0.0.1:{self._listener.getsockname()[1]}{parts.path}"
        self._word: bytes | None = None
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []
        self.dropped = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def drop_answer_to(self, word: bytes) -> None:
        """Drop the answer to the next command holding `word`, on whichever connection."""
        with self._lock:
            self._word = word

    def close(self) -> None:
        self._listener.close()
        with self._lock:
            for sock in self._sockets:
                _close(sock)

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return  # closed
            server = socket.create_connection(self._target)
            with self._lock:
                self._sockets += [client, server]
            doomed = threading.Event()  # this connection's next answer is dropped
            threading.Thread(target=self._send, args=(client, server, doomed), daemon=True).start()
            threading.Thread(target=self._answer, args=(server, client, doomed),
                             daemon=True).start()

    def _send(self, client: socket.socket, server: socket.socket, doomed: threading.Event
              ) -> None:
        try:
            while data := client.recv(65536):
                with self._lock:
                    if self._word is not None and self._word in data:
                        self._word = None
                        doomed.set()
                server.sendall(data)
        except OSError:
            pass
        _close(client)
        _close(server)

    def _answer(self, server: socket.socket, client: socket.socket, doomed: threading.Event
                ) -> None:
        try:
            while data := server.recv(65536):
                if doomed.is_set():
                    with self._lock:
                        self.dropped += 1
                    break
                client.sendall(data)
        except OSError:
            pass
        _close(server)
        _close(client)


def _close(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    sock.close()
