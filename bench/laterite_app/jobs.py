"""The laterite side of the workload: one no-op job."""

from laterite_django import job

from bench.systems._record import record


@job("bench.noop")
def noop(i):
    record(i)
