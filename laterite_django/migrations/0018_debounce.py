from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('laterite_django', '0017_job_checkpoint'),
    ]

    operations = [
        migrations.AddField(
            model_name='job',
            name='debounce_until',
            field=models.DateTimeField(
                blank=True, null=True,
                help_text="A debounced job: the latest a later push with its key may make it "
                          "due (its first push plus debounce_max).",
            ),
        ),
        migrations.AddField(
            model_name='outboxjob',
            name='debounce',
            field=models.FloatField(
                blank=True, null=True,
                help_text="A debounced push: it replaces the waiting job holding its "
                          "unique_key, due this many seconds after its move (NULL: a plain "
                          "push).",
            ),
        ),
        migrations.AddField(
            model_name='outboxjob',
            name='debounce_max',
            field=models.FloatField(
                blank=True, null=True,
                help_text="A debounced push: the longest its job may wait after the push "
                          "that stored it, in seconds (NULL: no such deadline).",
            ),
        ),
    ]
