"""What a one-job push costs redis-server, call by call of laterite's PUSH_ONE script.

    python bench/redis_push_cost.py [--n 4000] [--rounds 9]

Runs laterite's lean push script (`lua/push_one.lua`) by EVALSHA,
one job per round trip, and beside it, in alternating rounds on db 6 of
$BENCH_REDIS_URL's server (flushed before each round and at the end): a bare
`LPUSH` of the same payload (the one call Huey's push makes), an empty script
given the same arguments (what EVALSHA itself costs), and the script without each
of its calls in turn. Prints, per row, the median wall and redis-server CPU
microseconds per push (from /proc/<pid>/task/*/schedstat, every thread of the
server's process: the server must run on this machine). The rows without a call
are not pushes anyone could use: each prices what one guarantee costs the server.
No Python of laterite runs in the timed loop: redis-py sends every row alike.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if __package__ in (None, ""):  # `python bench/redis_push_cost.py`
    sys.path.insert(0, str(ROOT))

from bench.profile_push import schedstat_ns  # noqa: E402
from laterite_django.stores.redis.keys import SENT_TTL, WAKE_CAP  # noqa: E402
from laterite_django.stores.redis.scripts import SOURCES  # noqa: E402

PUSH_ONE = SOURCES["push_one"]

# Each call of PUSH_ONE, as its source has it, and what stands in for it when dropped.
CALLS = {
    "the resend record (SET ... EX)": (
        f"redis.call('SET', sent, number .. ':' .. id, 'EX', {SENT_TTL})\n", ""),
    "the wake-up (RPUSH, LTRIM)": (
        f"if redis.call('RPUSH', q .. 'wake', '1') > {WAKE_CAP} then\n"
        f"  redis.call('LTRIM', q .. 'wake', -{WAKE_CAP}, -1)\nend\n", ""),
    "the queue's registration (SADD)": ("redis.call('SADD', P .. ':queues', queue)\n", ""),
    "its place in line (ZADD)": (
        "if tonumber(avail) <= tonumber(ARGV[2]) then\n"
        "  redis.call('ZADD', q .. 'ready', -tonumber(priority), m)\nelse\n"
        "  redis.call('ZADD', q .. 'delayed', avail, id)\nend\n", ""),
    "the id's overwrite check (EXISTS)": (
        "repeat\n  id = tostring(redis.call('INCR', P .. ':id'))\n"
        "until redis.call('EXISTS', P .. ':job:' .. id) == 0\n",
        "id = tostring(redis.call('INCR', P .. ':id'))\n"),
}


def without(*names: str) -> str:
    """PUSH_ONE without the calls `names` (keys of CALLS)."""
    source = PUSH_ONE
    for name in names:
        old, new = CALLS[name]
        if old not in source:
            raise SystemExit(f"PUSH_ONE changed: {old!r} is not in it; update CALLS")
        source = source.replace(old, new)
    return source


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=4000)
    parser.add_argument("--rounds", type=int, default=9)
    args = parser.parse_args()
    import redis

    url = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/4").rsplit("/", 1)[0]
    client = redis.Redis.from_url(url + "/6")
    pid = client.info("server")["process_id"]
    if schedstat_ns(pid, "redis-server") is None:
        raise SystemExit(f"redis-server (pid {pid}) does not run on this machine")

    def server_ns() -> int:
        return schedstat_ns(pid, "redis-server") or 0

    payload = '{"args": [1], "kwargs": {}}'
    now = str(int(time.time() * 1e6))

    def script(source: str):
        sha = client.script_load(source)
        return lambda i: client.evalsha(
            sha, 0, "bench", now, "bench.noop", "default", payload, "0", now, now, "",
            "sender", str(i), "0")

    rows = {
        "bare LPUSH (Huey's one call)": lambda i: client.lpush("bench:lpush", payload),
        "empty script, the same arguments": script("return {1}"),
        "PUSH_ONE, as laterite pushes": script(PUSH_ONE),
        **{f"without {name}": script(without(name)) for name in CALLS},
        "the id and the job's hash only (INCR, HSET)": script(without(*CALLS)),
    }
    got: dict[str, list[tuple[float, float]]] = {key: [] for key in rows}
    for push in rows.values():
        for i in range(100):  # warm up: scripts, connection
            push(i)
    keys = list(rows)
    try:
        for r in range(args.rounds):
            for key in keys if r % 2 == 0 else keys[::-1]:
                push = rows[key]
                client.flushdb()
                cpu, wall = server_ns(), time.perf_counter()
                for i in range(args.n):
                    push(i)
                wall = time.perf_counter() - wall
                got[key].append((wall / args.n * 1e6, (server_ns() - cpu) / args.n / 1000))
    finally:
        client.flushdb()
    print(f"{'':44} {'wall us':>8} {'server cpu us':>14}")
    for key, runs in got.items():
        wall = statistics.median(w for w, _ in runs)
        cpu = statistics.median(c for _, c in runs)
        print(f"{key:44} {wall:8.1f} {cpu:14.1f}")


if __name__ == "__main__":
    main()
