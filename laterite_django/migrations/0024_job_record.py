"""JobRecord: the job history (LATERITE_QUEUE_HISTORY). On PostgreSQL the table is
partitioned by day on finished_at, which a model cannot say: its DDL is the store's
(stores/database/history.POSTGRES_DDL), with a default partition and today's and the
next days' made at once; elsewhere the model's plain table."""

from datetime import UTC, datetime

from django.db import migrations, models

from laterite_django.stores.database.history import POSTGRES_DDL, keep_partitions


def create_table(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        schema_editor.create_model(apps.get_model("laterite_django", "JobRecord"))
        return
    with schema_editor.connection.cursor() as cursor:
        for statement in POSTGRES_DDL:
            cursor.execute(statement)
        keep_partitions(cursor, datetime.now(UTC), longest=None)


def drop_table(apps, schema_editor):
    schema_editor.execute("DROP TABLE laterite_job_record")


class Migration(migrations.Migration):

    dependencies = [
        ("laterite_django", "0023_sequences"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="JobRecord",
                    fields=[
                        ("id", models.BigAutoField(primary_key=True, serialize=False)),
                        ("job_id", models.BigIntegerField(help_text="Its id while queued.")),
                        ("name", models.CharField(max_length=200)),
                        ("queue", models.CharField(max_length=100)),
                        ("args", models.JSONField(blank=True, help_text='As stored: "[encrypted]" where an encrypted one was.', null=True)),
                        ("kwargs", models.JSONField(blank=True, help_text='As stored: "[encrypted]" where an encrypted one was.', null=True)),
                        ("encrypted", models.JSONField(blank=True, help_text="The ciphertext of its encrypted arguments ({'key': id, 'ct': ...}).", null=True)),
                        ("status", models.CharField(choices=[("succeeded", "Succeeded"), ("failed", "Failed"), ("cancelled", "Cancelled")], max_length=10)),
                        ("attempts", models.IntegerField(default=0, help_text="Claims, the last one included.")),
                        ("pushed_at", models.DateTimeField(blank=True, null=True)),
                        ("started_at", models.DateTimeField(blank=True, help_text="When its last attempt started (its worker's clock).", null=True)),
                        ("finished_at", models.DateTimeField(help_text="When it ended (its worker's clock).")),
                        ("worker", models.CharField(blank=True, default="", help_text="The worker of its last attempt (host:pid).", max_length=200)),
                        ("error", models.TextField(blank=True, default="", help_text="Why it failed or was cancelled.")),
                    ],
                    options={
                        "db_table": "laterite_job_record",
                        "ordering": ["-finished_at", "-id"],
                        "indexes": [
                            models.Index(fields=["finished_at"], name="laterite_record_finished"),
                            models.Index(fields=["name", "finished_at"], name="laterite_record_name"),
                            models.Index(fields=["queue", "finished_at"], name="laterite_record_queue"),
                            models.Index(fields=["job_id"], name="laterite_record_job"),
                        ],
                    },
                ),
            ],
        ),
        # After the model's state, so that `apps` knows it.
        migrations.RunPython(create_table, drop_table),
    ]
