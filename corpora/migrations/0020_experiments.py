"""Profile experiments (docs/decisions/profile-experiments.md): an experiment over a pair and its variants,
each a service activated on the experiment's sandbox. New tables only: nothing existing changes."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("corpora", "0019_package_tallies"),
        ("services", "0007_in_flight"),
    ]

    operations = [
        migrations.CreateModel(
            name="Experiment",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("name", models.CharField(max_length=100, unique=True)),
                ("corpus_name", models.CharField(max_length=100)),
                ("service_name", models.CharField(max_length=100)),
                ("profile", models.JSONField()),
                ("actor", models.CharField(max_length=100)),
                ("job_uuid", models.UUIDField(null=True)),
                ("created_at", models.DateTimeField(auto_now_add=True)),
                (
                    "corpus",
                    models.ForeignKey(
                        null=True, on_delete=django.db.models.deletion.DO_NOTHING, related_name="+", to="corpora.corpus"
                    ),
                ),
                (
                    "sandbox",
                    models.ForeignKey(
                        null=True, on_delete=django.db.models.deletion.DO_NOTHING, related_name="+", to="corpora.corpus"
                    ),
                ),
                (
                    "service",
                    models.ForeignKey(
                        null=True,
                        on_delete=django.db.models.deletion.DO_NOTHING,
                        related_name="+",
                        to="services.service",
                    ),
                ),
            ],
            options={
                "ordering": ["-created_at", "-id"],
            },
        ),
        migrations.CreateModel(
            name="ExperimentVariant",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("name", models.CharField(max_length=100)),
                ("changes", models.JSONField()),
                ("service_name", models.CharField(max_length=100)),
                (
                    "experiment",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.DO_NOTHING, related_name="variants", to="corpora.experiment"
                    ),
                ),
                (
                    "service",
                    models.ForeignKey(
                        null=True,
                        on_delete=django.db.models.deletion.DO_NOTHING,
                        related_name="+",
                        to="services.service",
                    ),
                ),
            ],
            options={
                "ordering": ["id"],
                "constraints": [
                    models.UniqueConstraint(fields=("experiment", "name"), name="experimentvariant_unique_name")
                ],
            },
        ),
    ]
