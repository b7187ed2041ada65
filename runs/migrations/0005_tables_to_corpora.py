"""The diffs of snapshots and the runs' telemetry leave the state of runs for corpora, whose modules write
them (corpora 0014 renames their tables). Only Django's state changes here; no table is touched."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("corpora", "0014_tables_of_their_writer"),
        ("runs", "0004_telemetry"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.RemoveField(
                    model_name="taskdiff",
                    name="diff",
                ),
                migrations.RemoveField(
                    model_name="telemetrybin",
                    name="run",
                ),
                migrations.RemoveField(
                    model_name="telemetryminute",
                    name="run",
                ),
                migrations.DeleteModel(
                    name="SnapshotDiff",
                ),
                migrations.DeleteModel(
                    name="TaskDiff",
                ),
                migrations.DeleteModel(
                    name="TelemetryBin",
                ),
                migrations.DeleteModel(
                    name="TelemetryMinute",
                ),
            ],
        ),
    ]
