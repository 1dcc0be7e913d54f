"""Jobs whose arguments are stored encrypted (tests/jobs/test_encryption.py).

None has a concurrency limit: a registered limited job changes every claim of the
suite (flow.limits.any_job_limited); the test of a limited one defines it there.
"""

from __future__ import annotations

import os

from laterite_django import job

from .models import Record


@job("tests.enc.every", encrypt=True)
def every(user_id: int, email: str, token: str = "") -> None:
    """Record its arguments as it got them."""
    Record.objects.create(kind="enc-every", value=f"{user_id}|{email}|{token}",
                          pid=os.getpid())


@job("tests.enc.named", encrypt=["email"], unique_key=lambda user_id, email: f"once-{email}")
def named(user_id: int, email: str) -> None:
    """Only `email` encrypted; unique per e-mail address."""
    Record.objects.create(kind="enc-named", value=f"{user_id}|{email}", pid=os.getpid())


@job("tests.enc.broken", encrypt=True, tries=1)
def broken(email: str, details: dict) -> None:
    """Fail for good, quoting its arguments in the message."""
    raise ValueError(f"cannot reach {email!r} ({details})")
