"""Runs and snapshots leave the runs app for corpora (corpora/migrations/0008_pair_owns_runs.py); the
diffs now reference corpora.Snapshot. Only Django's state changes; no table is touched."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("corpora", "0008_pair_owns_runs"),
        ("runs", "0002_snapshots"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.RemoveField(
                    model_name="snapshot",
                    name="corpus",
                ),
                migrations.RemoveField(
                    model_name="snapshot",
                    name="service",
                ),
                migrations.AlterField(
                    model_name="snapshotdiff",
                    name="previous",
                    field=models.ForeignKey(
                        on_delete=django.db.models.deletion.DO_NOTHING, related_name="+", to="corpora.snapshot"
                    ),
                ),
                migrations.AlterField(
                    model_name="snapshotdiff",
                    name="current",
                    field=models.ForeignKey(
                        on_delete=django.db.models.deletion.DO_NOTHING, related_name="+", to="corpora.snapshot"
                    ),
                ),
                migrations.DeleteModel(
                    name="Run",
                ),
                migrations.DeleteModel(
                    name="Snapshot",
                ),
            ],
        ),
    ]
