"""Fixtures of the store tests."""

from __future__ import annotations

import pytest
from django.db import connection


@pytest.fixture
def pg_store(store):
    """The database store, on PostgreSQL only (its plans, its push path); elsewhere
    the test is skipped."""
    if connection.vendor != "postgresql":
        pytest.skip("a PostgreSQL-only test (LATERITE_TEST_DB=postgres)")
    return store
