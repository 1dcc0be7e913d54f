# Per queue and minute, the latency a worker sampled (the admin overview's third chart).

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('laterite_django', '0025_attempt_log'),
    ]

    operations = [
        migrations.AddField(
            model_name='minutecount',
            name='latency',
            field=models.FloatField(blank=True, help_text="Seconds the queue's oldest due waiting job had waited when a worker sampled it in this minute (0: none waited; empty: not sampled).", null=True),
        ),
    ]
