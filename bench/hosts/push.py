"""One pusher of a multi-host run: `python -m bench.hosts.push START COUNT SLOW_EVERY
SLOW_SECONDS` pushes jobs START..START+COUNT-1 in batches of 1000 (every SLOW_EVERY-th a
slow one, 0 for none) and prints how many the store acknowledged, and the seconds."""

from __future__ import annotations

import os
import sys
import time

import django

__all__: list[str] = []

BATCH = 1000


def main(start: int, count: int, slow_every: int, slow_seconds: float) -> None:
    from bench.hosts.project.jobs import noop, slow

    acknowledged = 0
    began = time.monotonic()
    for first in range(start, start + count, BATCH):
        numbers = range(first, min(first + BATCH, start + count))
        quick = [(i,) for i in numbers if not slow_every or i % slow_every]
        slows = [(i, slow_seconds) for i in numbers if slow_every and not i % slow_every]
        for job_, calls in ((noop, quick), (slow, slows)):
            if calls:
                pushed = job_.push_many(calls)
                acknowledged += sum(1 for p in pushed if p.status == "queued")
    print(acknowledged, f"{time.monotonic() - began:.3f}", flush=True)


if __name__ == "__main__":
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bench.hosts.project.settings")
    django.setup()
    main(int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]))
