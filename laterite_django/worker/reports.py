"""What a worker process tells its supervisor: the claims in hand and the job running.

One JSON object per line on a pipe. The supervisor needs each claim (with its
token) to settle it when the worker cannot: killed past its job's timeout,
died, or stopped at the end of a shutdown's grace. A claim crosses whole when
claimed; when its job starts and when it succeeds, the times the worker stamped
on it (`Claim.started`, `ended`) follow, for the job history's record of a job
the supervisor settles.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import threading
from collections.abc import Iterator, Sequence
from datetime import datetime
from typing import Any

from ..core.values import Claim

__all__ = ["Monitor", "PipeReporter", "ReportReader", "claim_from_dict", "claim_to_dict"]

logger = logging.getLogger("laterite")

_DATES = ("pushed_at", "retry_until", "available_at")
# A claim's fields, all flat values: read one by one, not by `dataclasses.asdict`,
# which copies each value deeply: about 40 us a claim against 4 (each claim of a
# batch is reported before the batch starts).
_FIELDS = tuple(field.name for field in dataclasses.fields(Claim))


def claim_to_dict(claim: Claim) -> dict[str, Any]:
    data = {name: getattr(claim, name) for name in _FIELDS}
    for field in _DATES:
        if data[field] is not None:
            data[field] = data[field].isoformat()
    return data


def claim_from_dict(data: dict[str, Any]) -> Claim:
    data = dict(data)
    for field in _DATES:
        if data.get(field) is not None:
            data[field] = datetime.fromisoformat(data[field])
    return Claim(**data)


class Monitor:
    """Hears what a worker does with its claims; this one ignores it all."""

    def hold(self, claims: Sequence[Claim]) -> None:
        """The worker claimed these jobs."""

    def start(self, claim: Claim, timeout: float | None) -> None:
        """The worker starts running this job, which may take `timeout` seconds."""

    def cancel(self, claim: Claim) -> None:
        """A cancel of this running job was asked: it has `flow.cancel.GRACE` seconds to
        stop, then it is interrupted (called from the heartbeat thread)."""

    def succeeded(self, claim: Claim) -> None:
        """This job succeeded; the worker deletes it soon (with its next claim)."""

    def done(self, claim: Claim) -> None:
        """The worker settled this job (or gave it back): it is no longer in hand."""

    def exit(self, reason: str) -> None:
        """The worker stops for `reason` ("max-jobs", "max-memory", "empty", ...)."""

    def tally(self, data: dict[str, Any]) -> None:
        """Counts for the metrics since the last ones (see metrics.tally)."""


class PipeReporter(Monitor):
    """Write each event as a line of JSON to the supervisor's pipe."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.broken = False
        # The worker's thread and its heartbeat (giving back a slow batch) both report.
        self._lock = threading.Lock()

    def _send(self, message: dict[str, Any]) -> None:
        if self.broken:
            return
        data = (json.dumps(message, separators=(",", ":")) + "\n").encode()
        with self._lock:
            try:
                while data:
                    data = data[os.write(self.fd, data):]
            except OSError:
                # The supervisor is gone; its death signal stops this worker.
                self.broken = True

    def hold(self, claims: Sequence[Claim]) -> None:
        self._send({"op": "hold", "claims": [claim_to_dict(c) for c in claims]})

    def start(self, claim: Claim, timeout: float | None) -> None:
        # With its start (the worker's clock): a job the supervisor settles, its worker
        # dead or killed, gets its history record with it.
        self._send({"op": "start", "id": claim.id, "token": claim.token, "timeout": timeout,
                    "started": claim.started})

    def cancel(self, claim: Claim) -> None:
        self._send({"op": "cancel", "id": claim.id, "token": claim.token})

    def succeeded(self, claim: Claim) -> None:
        self._send({"op": "succeeded", "id": claim.id, "token": claim.token,
                    "ended": claim.ended})

    def done(self, claim: Claim) -> None:
        self._send({"op": "done", "id": claim.id, "token": claim.token})

    def exit(self, reason: str) -> None:
        self._send({"op": "exit", "reason": reason})

    def tally(self, data: dict[str, Any]) -> None:
        self._send({"op": "tally", **data})


class ReportReader:
    """Split the bytes read from a worker's pipe into messages."""

    def __init__(self) -> None:
        self._buffer = b""

    def feed(self, data: bytes) -> Iterator[dict[str, Any]]:
        self._buffer += data
        *lines, self._buffer = self._buffer.split(b"\n")
        for line in lines:
            try:
                message = json.loads(line)
            except ValueError:
                logger.warning("Unreadable report from a worker process: %r", line[:200])
                continue
            if isinstance(message, dict):
                yield message
