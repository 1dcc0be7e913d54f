"""The Celery app and task, shared by the pusher and the workers."""

import os

from celery import Celery

from bench.systems._record import record

__all__ = ["app", "noop"]

app = Celery("bench", broker=os.environ["BENCH_REDIS_URL"])
app.conf.update(
    task_ignore_result=True,
    task_default_queue="bench",
    broker_connection_retry_on_startup=True,
    worker_hijack_root_logger=False,
)


@app.task(name="noop")
def noop(i):
    record(i)
