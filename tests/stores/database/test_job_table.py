"""The job table's shape: every push is an INSERT into it, so it carries nothing an
INSERT pays for that laterite does not need. Its counters have no CHECK constraint
(PostgreSQL compiles each one again at every INSERT), and the model still refuses a
negative count where Django validates (forms, the admin, `full_clean`)."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError
from django.db import connection
from django.utils import timezone

from laterite_django.models import Job

__all__: list[str] = []

COUNTERS = ["attempts", "uncounted", "claim_position", "concurrency_limit"]


@pytest.mark.parametrize("store_kind", ["database"], indirect=True)
def test_the_job_table_checks_nothing_at_insert(store):
    with connection.cursor() as cursor:
        constraints = connection.introspection.get_constraints(cursor, Job._meta.db_table)
    checks = {name: c["columns"] for name, c in constraints.items() if c["check"]}
    assert checks == {}


@pytest.mark.parametrize("field", COUNTERS)
def test_a_negative_counter_is_refused_by_the_model(field):
    now = timezone.now()
    job = Job(name="tests.noop", queue="default", payload="{}", pushed_at=now,
              available_at=now, **{field: -1})
    with pytest.raises(ValidationError) as raised:
        job.clean_fields()
    assert list(raised.value.message_dict) == [field]
    setattr(job, field, 0)
    job.clean_fields()
