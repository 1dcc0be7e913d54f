"""The flow scenario's keyed job (bench/scenarios.py `flow`): a no-op run at most once at
a time per key, over $BENCH_FLOW_KEYS keys. Imported only where $BENCH_FLOW is "keyed"
(a registered job with `concurrency` makes every claim of its process the limited one).
"""

import os

from bench.systems._record import record
from laterite_django import job

KEYS = int(os.environ.get("BENCH_FLOW_KEYS", "100"))


@job("bench.noop_keyed", concurrency=1, concurrency_key=lambda i: f"k{i % KEYS}")
def noop_keyed(i):
    record(i)
