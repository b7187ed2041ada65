"""A run's cost and the lease order (docs/decisions/cost-and-schedule.md): each task's runtime row keeps the
CPU time and peak resident memory its worker measured, each minute of a run's telemetry the CPU time of
the results applied in it; each task keeps its expected runtime, and the TODO tasks of a service are
indexed longest-expected-first. Every column is nullable or has a constant default, so adding it changes
only the catalog (no table is rewritten); the index is built once over the TODO tasks."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("corpora", "0016_infrastructure_failures")]

    operations = [
        migrations.AddField(model_name="taskruntime", name="cpu_ms", field=models.IntegerField(blank=True, null=True)),
        migrations.AddField(
            model_name="taskruntime", name="peak_rss_kb", field=models.IntegerField(blank=True, null=True)
        ),
        migrations.AddField(
            model_name="telemetryminute",
            name="cpu_ms",
            field=models.BigIntegerField(db_default=0, default=0),
        ),
        migrations.AddField(
            model_name="telemetryminute",
            name="cpu_results",
            field=models.BigIntegerField(db_default=0, default=0),
        ),
        migrations.AddField(model_name="task", name="expected_ms", field=models.IntegerField(db_default=0, default=0)),
        migrations.AddIndex(
            model_name="task",
            index=models.Index(
                condition=models.Q(("status", 0)),
                fields=["service", "-expected_ms", "id"],
                name="task_todo_longest_first",
            ),
        ),
    ]
