"""A run's telemetry: per (run, stage, log-scale bin) task counts and per (run, minute) applied results,
written set-based by the dispatcher's lease and ingestion statements (corpora.telemetry). The composite
keys are what their upserts conflict on; run_id leads both, so no other index is needed."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("corpora", "0010_telemetry_task_todo_since"),
        ("runs", "0003_runs_and_snapshots_to_corpora"),
    ]

    operations = [
        migrations.CreateModel(
            name="TelemetryBin",
            fields=[
                (
                    "pk",
                    models.CompositePrimaryKey(
                        "run", "stage", "bin", blank=True, editable=False, primary_key=True, serialize=False
                    ),
                ),
                ("stage", models.SmallIntegerField()),
                ("bin", models.SmallIntegerField()),
                ("count", models.BigIntegerField()),
                (
                    "run",
                    models.ForeignKey(
                        db_constraint=False,
                        db_index=False,
                        on_delete=django.db.models.deletion.DO_NOTHING,
                        related_name="+",
                        to="corpora.run",
                    ),
                ),
            ],
        ),
        migrations.CreateModel(
            name="TelemetryMinute",
            fields=[
                (
                    "pk",
                    models.CompositePrimaryKey(
                        "run", "minute", blank=True, editable=False, primary_key=True, serialize=False
                    ),
                ),
                ("minute", models.DateTimeField()),
                ("count", models.BigIntegerField()),
                (
                    "run",
                    models.ForeignKey(
                        db_constraint=False,
                        db_index=False,
                        on_delete=django.db.models.deletion.DO_NOTHING,
                        related_name="+",
                        to="corpora.run",
                    ),
                ),
            ],
        ),
    ]
