"""Bare redis-py floor: LPUSH, then LMOVE to a processing list and LREM when done."""

import json
import sys

from bench.systems.base import Base, pkg_versions

__all__ = ["System"]

QUEUE = "floor:queue"


class System(Base):
    def versions(self):
        return {**pkg_versions("redis", "hiredis"), "redis-server": self.redis_server_version()}

    def setup(self):
        self.redis_flush()
        self.r = self.redis_client()

    def reset(self):
        self.r.flushdb()

    def teardown(self):
        self.r.flushdb()
        self.r.close()

    def push_one(self, i):
        self.r.lpush(QUEUE, json.dumps({"i": i}))

    def push_bulk(self, ids):
        self.r.lpush(QUEUE, *[json.dumps({"i": i}) for i in ids])

    def worker_commands(self, n):
        return [[sys.executable, "-m", "bench.systems.floor_worker", "redis", "lmove"]] * n
