"""Who sends a Redis push, so that a push sent again stores nothing twice.

A connection can break after Redis ran a push and before its answer arrived (a
network fault, a server's client timeout, a proxy's reset). The push is then sent
again, as redis-py's retry would send any command; without more, its jobs would be
stored twice. So each push names its sender (a random name per process and thread)
and its number among that sender's pushes, and the push script keeps, for SENT_TTL
seconds, the number of the sender's last push with the ids it stored, under one key
per sender (`<prefix>:sent:<sender>`), not one per push. A push sent again says so,
and its script answers with the ids kept for its number instead of pushing again.
A thread sends one push at a time, so the last one is the only one to look for.
"""

from __future__ import annotations

import itertools
import os
import threading
import uuid

__all__ = ["next_push"]


class _Sender(threading.local):
    """This thread's name as a sender, and the numbers of its pushes."""

    pid = 0
    name = ""
    numbers: itertools.count[int] = itertools.count(1)


_sender = _Sender()


def next_push() -> tuple[str, str]:
    """This thread's sender name and the number of its next push. A forked child, whose
    thread looks like its parent's, takes a name of its own."""
    sender = _sender
    pid = os.getpid()
    if sender.pid != pid:
        sender.pid, sender.name, sender.numbers = pid, uuid.uuid4().hex, itertools.count(1)
    return sender.name, str(next(sender.numbers))
