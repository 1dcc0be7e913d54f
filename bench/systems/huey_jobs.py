"""The Huey instance and task, shared by the pusher and the consumer."""

import os

from huey import RedisHuey

from bench.systems._record import record

__all__ = ["huey", "noop"]

huey = RedisHuey("bench", url=os.environ["BENCH_REDIS_URL"])


@huey.task()
def noop(i):
    record(i)
