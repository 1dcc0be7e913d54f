"""The laterite side of the workload: one no-op job."""

from bench.systems._record import record
from laterite_django import job


@job("bench.noop")
def noop(i):
    record(i)
