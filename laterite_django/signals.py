"""Signals sent by the worker as jobs start, succeed, retry and fail."""

from django.dispatch import Signal

__all__ = ["job_failed", "job_retrying", "job_started", "job_succeeded"]

# Every signal is sent with keyword arguments id, name, queue, attempts.
job_started = Signal()
# Adds duration (seconds) and result (the function's return value).
job_succeeded = Signal()
# Adds error (text) and delay (seconds until the next attempt).
job_retrying = Signal()
# Adds error (text) and payload (the stored JSON text).
job_failed = Signal()
