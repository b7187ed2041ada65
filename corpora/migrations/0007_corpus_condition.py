from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("corpora", "0006_task_pair_status_id_index"),
    ]

    operations = [
        migrations.AddField(
            model_name="corpus",
            name="condition",
            field=models.JSONField(blank=True, null=True),
        ),
    ]
