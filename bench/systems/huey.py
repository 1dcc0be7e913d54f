"""Huey on Redis: calling the task enqueues it; `huey_consumer -k process -w n`."""

from bench.systems.base import Base, pkg_versions

__all__ = ["System"]


class System(Base):
    has_bulk = False  # Task.map() is a loop of enqueues: no bulk path

    def versions(self):
        return {**pkg_versions("huey", "redis", "hiredis"),
                "redis-server": self.redis_server_version()}

    def setup(self):
        import os

        os.environ["BENCH_REDIS_URL"] = self.redis_url
        self.redis_flush()
        from bench.systems import huey_jobs

        self.jobs = huey_jobs

    def reset(self):
        self.redis_flush()

    def teardown(self):
        self.redis_flush()

    def push_one(self, i):
        self.jobs.noop(i)

    def push_bulk(self, ids):
        self.jobs.noop.map(ids)

    def fill(self, ids, how="head"):
        """The messages Task.map() would LPUSH, in pipelines (Huey has no bulk push).

        beside: the list of another Huey instance on the same db (Huey's Redis
        queue is one list: a job cannot be pushed ahead of a backlog in it).
        """
        if how not in ("head", "beside"):
            return super().fill(ids, how)
        huey = self.jobs.huey
        key = huey.storage.queue_key if how == "head" else "huey.redis.backlog"
        conn = huey.storage.conn
        for k in range(0, len(ids), self.fill_chunk):
            pipe = conn.pipeline(transaction=False)
            for i in ids[k : k + self.fill_chunk]:
                pipe.lpush(key, huey.serialize_task(self.jobs.noop.s(i)))
            pipe.execute()

    def worker_commands(self, n):
        # One consumer with n worker processes: Huey's own way to use n processes.
        return [
            [
                str(self.bin / "huey_consumer"),
                "bench.systems.huey_jobs.huey",
                "-k",
                "process",
                "-w",
                str(n),
                "-q",
            ]
        ]
