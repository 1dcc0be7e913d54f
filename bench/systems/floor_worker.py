"""The floors' worker loop: `python -m bench.systems.floor_worker pg|redis MODE`.

As little as a worker can do: claim, decode the JSON payload, run the job,
settle. Exits on SIGTERM/SIGINT.
"""

import json
import os
import random
import signal
import sys

from bench.systems._record import noop

__all__ = ["main"]

RUNNING = True


def _stop(signum, frame):
    global RUNNING
    RUNNING = False


CLAIM_DELETE = """
DELETE FROM floor_job WHERE id = (
    SELECT id FROM floor_job ORDER BY id FOR UPDATE SKIP LOCKED LIMIT 1
) RETURNING id, payload
"""
CLAIM_UPDATE = """
UPDATE floor_job SET claimed_at = now(), token = %s WHERE id = (
    SELECT id FROM floor_job WHERE claimed_at IS NULL ORDER BY id FOR UPDATE SKIP LOCKED LIMIT 1
) RETURNING id, payload
"""
CLAIM_BATCH = """
UPDATE floor_job SET claimed_at = now(), token = %s WHERE id IN (
    SELECT id FROM floor_job WHERE claimed_at IS NULL ORDER BY id FOR UPDATE SKIP LOCKED LIMIT 100
) RETURNING id, payload
"""


def run_pg(mode):
    import psycopg

    conn = psycopg.connect(os.environ["BENCH_PG_DSN"], autocommit=True)
    listen = psycopg.connect(os.environ["BENCH_PG_DSN"], autocommit=True)
    listen.execute("LISTEN floor_job")
    token = random.getrandbits(62)
    while RUNNING:
        if mode == "delete":
            rows = conn.execute(CLAIM_DELETE).fetchall()
            for _, payload in rows:
                noop(payload["i"])
        elif mode == "update":
            rows = conn.execute(CLAIM_UPDATE, (token,)).fetchall()
            for job_id, payload in rows:
                noop(payload["i"])
                conn.execute("DELETE FROM floor_job WHERE id = %s AND token = %s", (job_id, token))
        else:
            rows = conn.execute(CLAIM_BATCH, (token,)).fetchall()
            for _, payload in rows:
                noop(payload["i"])
            if rows:
                conn.execute(
                    "DELETE FROM floor_job WHERE id = ANY(%s) AND token = %s",
                    ([r[0] for r in rows], token),
                )
        if not rows:
            # Idle: sleep until a push notifies (or a second passes).
            for _ in listen.notifies(timeout=1.0, stop_after=1):
                pass
            # Drop notifications that piled up while busy.
            for _ in listen.notifies(timeout=0):
                pass


def run_redis():
    import redis

    r = redis.Redis.from_url(os.environ["BENCH_REDIS_URL"])
    processing = f"floor:processing:{os.getpid()}"
    while RUNNING:
        raw = r.lmove("floor:queue", processing, "RIGHT", "LEFT")
        if raw is None:
            raw = r.blmove("floor:queue", processing, 1.0, "RIGHT", "LEFT")
            if raw is None:
                continue
        noop(json.loads(raw)["i"])
        r.lrem(processing, 1, raw)


def main():
    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    store, mode = sys.argv[1], sys.argv[2]
    if store == "pg":
        run_pg(mode)
    else:
        run_redis()


if __name__ == "__main__":
    main()
