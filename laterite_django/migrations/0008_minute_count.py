# Per queue and minute, the jobs that succeeded and failed (the admin's overview).

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('laterite_django', '0007_progress'),
    ]

    operations = [
        migrations.CreateModel(
            name='MinuteCount',
            fields=[
                ('id', models.BigAutoField(primary_key=True, serialize=False)),
                ('queue', models.CharField(max_length=100)),
                ('minute', models.DateTimeField(help_text="The minute's start (UTC).")),
                ('succeeded', models.PositiveIntegerField(default=0)),
                ('failed', models.PositiveIntegerField(default=0)),
            ],
            options={
                'verbose_name': 'overview',
                'verbose_name_plural': 'overview',
                'db_table': 'laterite_minute_count',
                'indexes': [models.Index(fields=['minute'], name='laterite_minute_minute')],
                'constraints': [models.UniqueConstraint(fields=('queue', 'minute'), name='laterite_minute_queue')],
            },
        ),
    ]
