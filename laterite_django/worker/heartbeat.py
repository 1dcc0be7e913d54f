"""A thread that keeps a worker's claims fresh while their jobs run."""

from __future__ import annotations

import logging
import threading

from django.db import close_old_connections, connections

from ..stores import Claim, Store

__all__ = ["Heartbeat"]

logger = logging.getLogger("laterite")


class Heartbeat:
    """Refresh the claims in hand every `interval` seconds, so a long job is never
    taken for abandoned while its worker lives."""

    def __init__(self, store: Store, interval: float) -> None:
        self.store = store
        self.interval = interval
        self._claims: dict[str, Claim] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def hold(self, claims: list[Claim]) -> None:
        with self._lock:
            for claim in claims:
                self._claims[claim.token + str(claim.id)] = claim

    def drop(self, claim: Claim) -> None:
        with self._lock:
            self._claims.pop(claim.token + str(claim.id), None)

    def drop_all(self) -> None:
        with self._lock:
            self._claims.clear()

    def held(self) -> list[Claim]:
        with self._lock:
            return list(self._claims.values())

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="laterite-heartbeat", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def _run(self) -> None:
        try:
            while not self._stop.wait(self.interval):
                claims = self.held()
                if not claims:
                    continue
                try:
                    close_old_connections()
                    self.store.heartbeat(claims)
                except Exception:
                    logger.exception(
                        "Heartbeat failed; will try again", extra={"action": "heartbeat_failed"}
                    )
        finally:
            self.store.close()
            connections.close_all()
