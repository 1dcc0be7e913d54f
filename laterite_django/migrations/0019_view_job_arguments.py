from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ('laterite_django', '0018_debounce'),
    ]

    operations = [
        migrations.AlterModelOptions(
            name='job',
            options={'permissions': [('view_job_arguments', 'Can view the decrypted arguments of jobs')]},
        ),
    ]
