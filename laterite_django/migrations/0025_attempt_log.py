"""The attempts of a job retried while its queue keeps history (Job.attempt_log) and a
finished job's attempts in its record (JobRecord.attempt_log). Both nullable, added
without a default: on PostgreSQL an ALTER TABLE ... ADD COLUMN of a catalog change only,
the partitioned laterite_job_record's by its parent (its partitions take it too)."""

from django.db import migrations, models

import laterite_django.models.jobs


class Migration(migrations.Migration):

    dependencies = [
        ("laterite_django", "0024_job_record"),
    ]

    operations = [
        migrations.AddField(
            model_name="job",
            name="attempt_log",
            # No CHECK (JSON_VALID) on SQLite: the job table checks nothing at insert.
            field=laterite_django.models.jobs.UncheckedJSONField(
                blank=True, null=True,
                help_text="Its attempts that failed and were retried, while its queue keeps "
                          "history (LATERITE_QUEUE_HISTORY): the first 3 and the last 7, each "
                          "{attempt, started, ended, worker, error}; NULL while none is kept."),
        ),
        migrations.AddField(
            model_name="jobrecord",
            name="attempt_log",
            field=models.JSONField(
                blank=True, null=True,
                help_text="Its attempts, oldest first, each {attempt, started, ended (epoch "
                          "seconds), worker, error}: the first 3 and the last 8, its last one "
                          "included; NULL when its last attempt was its only one kept (see "
                          "attempt_list)."),
        ),
    ]
