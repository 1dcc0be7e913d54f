"""Celery with the Redis broker: task.delay(); `celery worker --pool solo` processes."""

from bench.systems.base import Base, pkg_versions

__all__ = ["System"]


class System(Base):
    has_bulk = False  # no bulk publish in Celery: a loop of delay()

    def versions(self):
        return {
            **pkg_versions("celery", "kombu", "redis", "hiredis"),
            "redis-server": self.redis_server_version(),
        }

    def setup(self):
        import os

        os.environ["BENCH_REDIS_URL"] = self.redis_url
        self.redis_flush()
        from bench.systems import celery_jobs

        self.jobs = celery_jobs

    def reset(self):
        r = self.redis_client()
        r.delete("bench")
        for key in r.scan_iter("unacked*"):
            r.delete(key)
        r.close()

    def teardown(self):
        self.redis_flush()

    def push_one(self, i):
        self.jobs.noop.delay(i)

    def worker_commands(self, n):
        return [
            [
                str(self.bin / "celery"),
                "-A",
                "bench.systems.celery_jobs",
                "worker",
                "--pool",
                "solo",
                "-Q",
                "bench",
                "-n",
                f"w{k}@%h",
                "--loglevel",
                "WARNING",
                "--without-heartbeat",
                "--without-gossip",
                "--without-mingle",
            ]
            for k in range(n)
        ]
