"""Signals sent by the worker as jobs start, succeed, retry and fail."""

from django.dispatch import Signal

__all__ = ["job_failed", "job_retrying", "job_started", "job_succeeded"]

# Each `#:` line is the signal's entry in the manual (docs/reference/signals.md).

#: Sent as a job starts, with keyword arguments id, name, queue, attempts (as every
#: signal here is).
job_started = Signal()
#: Sent when a job returned: adds duration (seconds) and result (the function's
#: return value).
job_succeeded = Signal()
#: Sent when a job will be tried again: adds error (text) and delay (seconds until the
#: next attempt).
job_retrying = Signal()
#: Sent when a job went to the failed list: adds error (text) and payload (the stored
#: JSON text).
job_failed = Signal()
