# The running attempt's progress (cx.progress). Depends on 0005 in this branch; it
# follows 0006_schedules once both are merged.

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('laterite_django', '0006_schedules'),
    ]

    operations = [
        migrations.AddField(
            model_name='job',
            name='progress',
            field=models.TextField(blank=True, db_default='', default='', help_text='JSON: what the running attempt last said of its progress (cx.progress).'),
        ),
    ]
