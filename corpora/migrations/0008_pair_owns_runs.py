"""Runs and snapshots move to the corpora app, which owns the pair and its runs (corpora.pairs). Only
Django's state changes: the tables keep their names (runs_run, runs_snapshot) and their rows."""

import django.contrib.postgres.fields
import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("corpora", "0007_corpus_condition"),
        ("runs", "0002_snapshots"),
        ("services", "0003_dispatcherstate_worker"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="Snapshot",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                            ),
                        ),
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
                    options={
                        "db_table": "runs_snapshot",
                        "ordering": ["-taken_at"],
                    },
                ),
                migrations.CreateModel(
                    name="Run",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                            ),
                        ),
                        ("owner", models.CharField(max_length=100)),
                        ("description", models.TextField(blank=True)),
                        ("started_at", models.DateTimeField(auto_now_add=True)),
                        ("finished_at", models.DateTimeField(blank=True, null=True)),
                        ("tallies", models.JSONField(blank=True, null=True)),
                        (
                            "corpus",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.DO_NOTHING, related_name="runs", to="corpora.corpus"
                            ),
                        ),
                        (
                            "service",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.DO_NOTHING,
                                related_name="runs",
                                to="services.service",
                            ),
                        ),
                        (
                            "snapshot",
                            models.ForeignKey(
                                blank=True,
                                null=True,
                                on_delete=django.db.models.deletion.DO_NOTHING,
                                related_name="+",
                                to="corpora.snapshot",
                            ),
                        ),
                    ],
                    options={
                        "db_table": "runs_run",
                        "ordering": ["-started_at"],
                    },
                ),
                migrations.AddConstraint(
                    model_name="snapshot",
                    constraint=models.UniqueConstraint(
                        fields=("corpus", "service", "taken_at"), name="snapshot_unique_pair_time"
                    ),
                ),
                migrations.AddIndex(
                    model_name="run",
                    index=models.Index(fields=["-started_at", "-id"], name="run_newest"),
                ),
                migrations.AddIndex(
                    model_name="run",
                    index=models.Index(fields=["corpus", "service", "-started_at"], name="run_pair_newest"),
                ),
                migrations.AddConstraint(
                    model_name="run",
                    constraint=models.UniqueConstraint(
                        condition=models.Q(("finished_at__isnull", True)),
                        fields=("corpus", "service"),
                        name="run_one_open_per_pair",
                    ),
                ),
            ],
        ),
    ]
