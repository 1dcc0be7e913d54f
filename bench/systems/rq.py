"""RQ: Queue.enqueue / enqueue_many; `rq worker` (forking Worker or SimpleWorker)."""

from bench.systems.base import Base, pkg_versions

__all__ = ["System"]

FUNC = "bench.systems._record.noop"


class System(Base):
    def __init__(self, *args):
        super().__init__(*args)
        self.simple = self.name == "rq_simple"
        if not self.simple:
            self.max_drain_jobs = 500  # a fork per job: ~100 jobs/s at best

    def versions(self):
        return {**pkg_versions("rq", "redis", "hiredis"),
                "redis-server": self.redis_server_version()}

    def setup(self):
        from redis import Redis
        from rq import Queue

        self.redis_flush()
        self.conn = Redis.from_url(self.redis_url)
        self.q = Queue("bench", connection=self.conn)

    def reset(self):
        # Keep the workers' registrations: they live in this Redis db too.
        for key in self.conn.scan_iter("rq:job:*", count=1000):
            self.conn.delete(key)
        for pattern in ("rq:queue:*", "rq:wip:*", "rq:finished:*", "rq:results:*"):
            for key in self.conn.scan_iter(pattern, count=1000):
                self.conn.delete(key)

    def teardown(self):
        self.conn.flushdb()
        self.conn.close()

    def push_one(self, i):
        self.q.enqueue(FUNC, i)

    def push_bulk(self, ids):
        from rq import Queue

        self.q.enqueue_many([Queue.prepare_data(FUNC, (i,)) for i in ids])

    def worker_commands(self, n):
        argv = [str(self.bin / "rq"), "worker", "-u", self.redis_url, "-q"]
        if self.simple:
            argv += ["-w", "rq.worker.SimpleWorker"]
        return [[*argv, "bench"]] * n
