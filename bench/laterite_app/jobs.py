"""The laterite side of the workload: one no-op job (and, for the flow scenario's
per-key drain, a keyed one: flow_jobs.py; for its fair drain, fair_jobs.py; for the
`*_encrypted` rows, one whose argument is stored encrypted)."""

import os

from bench.systems._record import record
from laterite_django import job

if os.environ.get("BENCH_FLOW") == "keyed":
    from bench.laterite_app import flow_jobs  # noqa: F401
if os.environ.get("BENCH_FLOW") == "fair":
    from bench.laterite_app import fair_jobs  # noqa: F401


@job("bench.noop")
def noop(i):
    record(i)


if os.environ.get("BENCH_SYSTEM", "").endswith("_encrypted"):
    # Registered only where LATERITE_QUEUE_ENCRYPTION_KEYS is set (bench/djproject).
    @job("bench.noop_encrypted", encrypt=True)
    def noop_encrypted(i):
        record(i)
