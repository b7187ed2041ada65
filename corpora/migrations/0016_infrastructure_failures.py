"""The worker thread that held a task when the machine last ended one of its attempts (a nullable column:
no row is written, PostgreSQL adds it in the catalogue), so that the dispatcher hands its retry to another
worker (docs/decisions/infrastructure-failures.md)."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("corpora", "0015_package_attribution")]

    operations = [
        migrations.AddField(
            model_name="task",
            name="last_worker",
            field=models.CharField(blank=True, max_length=200, null=True),
        ),
    ]
