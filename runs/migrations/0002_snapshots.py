"""Snapshots (two arrays per snapshot), frozen run tallies, and diffs of two snapshots with their
changed documents (an unlogged table)."""

import django.contrib.postgres.fields
import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("corpora", "0006_task_pair_status_id_index"),
        ("runs", "0001_initial"),
        ("services", "0003_dispatcherstate_worker"),
    ]

    operations = [
        migrations.CreateModel(
            name="Snapshot",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("taken_at", models.DateTimeField()),
                ("tasks", models.IntegerField(help_text="rows appended: one per task of the pair")),
                (
                    "document_ids",
                    django.contrib.postgres.fields.ArrayField(base_field=models.BigIntegerField(), size=None),
                ),
                (
                    "statuses",
                    django.contrib.postgres.fields.ArrayField(base_field=models.SmallIntegerField(), size=None),
                ),
                (
                    "corpus",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.DO_NOTHING, related_name="+", to="corpora.corpus"
                    ),
                ),
                (
                    "service",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.DO_NOTHING, related_name="+", to="services.service"
                    ),
                ),
            ],
            options={"ordering": ["-taken_at"]},
        ),
        migrations.AddConstraint(
            model_name="snapshot",
            constraint=models.UniqueConstraint(
                fields=("corpus", "service", "taken_at"), name="snapshot_unique_pair_time"
            ),
        ),
        migrations.AddField(model_name="run", name="tallies", field=models.JSONField(blank=True, null=True)),
        migrations.AddField(
            model_name="run",
            name="snapshot",
            field=models.ForeignKey(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.DO_NOTHING,
                related_name="+",
                to="runs.snapshot",
            ),
        ),
        migrations.AddIndex(model_name="run", index=models.Index(fields=["-started_at", "-id"], name="run_newest")),
        migrations.AddIndex(
            model_name="run", index=models.Index(fields=["corpus", "service", "-started_at"], name="run_pair_newest")
        ),
        migrations.CreateModel(
            name="SnapshotDiff",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("matrix", models.JSONField()),
                ("changed", models.IntegerField()),
                ("rows_ready", models.BooleanField(default=False)),
                ("created_at", models.DateTimeField(auto_now_add=True)),
                (
                    "previous",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.DO_NOTHING, related_name="+", to="runs.snapshot"
                    ),
                ),
                (
                    "current",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.DO_NOTHING, related_name="+", to="runs.snapshot"
                    ),
                ),
            ],
        ),
        migrations.AddConstraint(
            model_name="snapshotdiff",
            constraint=models.UniqueConstraint(fields=("previous", "current"), name="snapshotdiff_unique_pair"),
        ),
        migrations.CreateModel(
            name="TaskDiff",
            fields=[
                (
                    "pk",
                    models.CompositePrimaryKey(
                        "diff",
                        "previous_status",
                        "current_status",
                        "document_id",
                        blank=True,
                        editable=False,
                        primary_key=True,
                        serialize=False,
                    ),
                ),
                (
                    "diff",
                    models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.DO_NOTHING,
                        related_name="+",
                        db_constraint=False,
                        to="runs.snapshotdiff",
                    ),
                ),
                ("previous_status", models.SmallIntegerField()),
                ("current_status", models.SmallIntegerField()),
                ("document_id", models.BigIntegerField()),
            ],
        ),
        # Derived from snapshots, which never change: no WAL for its million-row writes; a crash empties
        # it and runs.actions.diff_rows_ensure writes a diff's rows again.
        migrations.RunSQL("ALTER TABLE runs_taskdiff SET UNLOGGED", "ALTER TABLE runs_taskdiff SET LOGGED"),
    ]
