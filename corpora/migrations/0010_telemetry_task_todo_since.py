"""When a task last became TODO within its run, for the queue wait of the run's telemetry
(corpora.telemetry). Nullable without a default: PostgreSQL adds the column without rewriting the table
of millions of tasks, and null stands for "since the run opened", which every existing task gets."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("corpora", "0009_snapshot_classes"),
    ]

    operations = [
        migrations.AddField(
            model_name="task",
            name="todo_since",
            field=models.DateTimeField(blank=True, null=True),
        ),
    ]
