"""The flow scenario's fair job (bench/scenarios.py `flow`, mode "fair"): a no-op whose
queue serves its $BENCH_FLOW_KEYS keys in turn (fair claims). Imported only where
$BENCH_FLOW is "fair"."""

import os

from bench.systems._record import record
from laterite_django import job

KEYS = int(os.environ.get("BENCH_FLOW_KEYS", "100"))


@job("bench.noop_fair", fair_key=lambda i: f"t{i % KEYS}")
def noop_fair(i):
    record(i)
