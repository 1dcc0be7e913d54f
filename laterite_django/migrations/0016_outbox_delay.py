from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('laterite_django', '0015_schedule_rule_hash'),
    ]

    operations = [
        migrations.AddField(
            model_name='outboxjob',
            name='delay',
            field=models.FloatField(
                blank=True, null=True,
                help_text="Seconds after its move to Redis at which the job is due, by "
                          "Redis's clock (NULL: due at available_at, a moment given by its "
                          "pusher).",
            ),
        ),
    ]
