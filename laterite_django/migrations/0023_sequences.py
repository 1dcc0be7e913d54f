# Ordered sequences (@job(sequence=...)): each key's head and the jobs held behind it.

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('laterite_django', '0022_job_fair_key'),
    ]

    operations = [
        migrations.CreateModel(
            name='SequenceHead',
            fields=[
                ('id', models.BigAutoField(primary_key=True, serialize=False)),
                ('key', models.CharField(max_length=255, unique=True)),
                ('head_id', models.BigIntegerField(blank=True, help_text="The head's job id (NULL: none: the next push is the head).", null=True)),
                ('failed', models.BooleanField(db_default=False, default=False, help_text="The head failed for good: its key's other jobs wait until it is retried or forgotten, or the sequence is released.")),
            ],
            options={
                'db_table': 'laterite_sequence',
                'indexes': [models.Index(condition=models.Q(('failed', True)), fields=['key'], name='laterite_sequence_failed')],
            },
        ),
        migrations.CreateModel(
            name='SequenceHeld',
            fields=[
                ('job_id', models.BigIntegerField(primary_key=True, serialize=False)),
                ('key', models.CharField(max_length=255)),
                ('due', models.DateTimeField(help_text='When it was to be due, had it not been held.')),
            ],
            options={
                'db_table': 'laterite_sequence_held',
                'indexes': [models.Index(fields=['key', 'job_id'], name='laterite_sequence_next')],
            },
        ),
    ]
