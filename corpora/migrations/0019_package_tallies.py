"""Package tallies (docs/decisions/package-attribution.md): the dictionary of package usages (a package
with its flags), each task row's usages, the tasks per (pair, status, usage), each snapshot package's
tallies, and a partial index of the package rows that show trouble, the papers a snapshot keeps
(conversion.choices.TROUBLE_FROM). The rows that exist are carried over set-based: the dictionary and the
task rows' usages from the package rows, the tallies from the package rows (a rerun's retired ones
included, until the purge deletes them), and each snapshot package's tallies from its arrays, which then
keep only the papers that showed trouble. Each new column has a constant default, so adding it changes
only the catalog."""

import django.contrib.postgres.fields
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("corpora", "0018_snapshot_infrastructure_documents"),
    ]

    operations = [
        migrations.CreateModel(
            name="PackageTally",
            fields=[
                (
                    "pk",
                    models.CompositePrimaryKey(
                        "corpus_id",
                        "service_id",
                        "task_status",
                        "package_usage_id",
                        blank=True,
                        editable=False,
                        primary_key=True,
                        serialize=False,
                    ),
                ),
                ("corpus_id", models.IntegerField()),
                ("service_id", models.IntegerField()),
                ("task_status", models.SmallIntegerField()),
                ("package_usage_id", models.IntegerField()),
                ("tasks", models.BigIntegerField()),
            ],
        ),
        migrations.AddField(
            model_name="snapshotpackage",
            name="tally_flags",
            field=django.contrib.postgres.fields.ArrayField(
                base_field=models.SmallIntegerField(), db_default="{}", size=None
            ),
        ),
        migrations.AddField(
            model_name="snapshotpackage",
            name="tally_statuses",
            field=django.contrib.postgres.fields.ArrayField(
                base_field=models.SmallIntegerField(), db_default="{}", size=None
            ),
        ),
        migrations.AddField(
            model_name="snapshotpackage",
            name="tally_tasks",
            field=django.contrib.postgres.fields.ArrayField(
                base_field=models.IntegerField(), db_default="{}", size=None
            ),
        ),
        migrations.AddField(
            model_name="taskmessages",
            name="packages",
            field=django.contrib.postgres.fields.ArrayField(
                base_field=models.IntegerField(), db_default="{}", size=None
            ),
        ),
        migrations.CreateModel(
            name="PackageUsage",
            fields=[
                ("id", models.AutoField(primary_key=True, serialize=False)),
                ("kind", models.CharField(choices=[("package", "package"), ("class", "class")], max_length=10)),
                ("package", models.CharField(max_length=100)),
                ("flags", models.SmallIntegerField()),
            ],
            options={
                "constraints": [
                    models.UniqueConstraint(fields=("kind", "package", "flags"), name="packageusage_unique_key")
                ],
            },
        ),
        migrations.AddIndex(
            model_name="taskpackage",
            index=models.Index(
                condition=models.Q(("flags__gte", 4)),
                fields=["corpus_id", "service_id", "kind", "package", "document_id"],
                include=["task_status", "flags"],
                name="taskpackage_trouble",
            ),
        ),
        migrations.RunSQL(
            [
                "INSERT INTO corpora_packageusage (kind, package, flags)"
                " SELECT DISTINCT kind, package, flags FROM corpora_taskpackage ORDER BY 1, 2, 3",
                "UPDATE corpora_taskmessages x SET packages = p.usages FROM ("
                "  SELECT k.task_id, array_agg(u.id ORDER BY u.id) AS usages FROM corpora_taskpackage k"
                "  JOIN corpora_packageusage u ON (u.kind, u.package, u.flags) = (k.kind, k.package, k.flags)"
                "  GROUP BY k.task_id) p WHERE x.task_id = p.task_id",
                "INSERT INTO corpora_packagetally (corpus_id, service_id, task_status, package_usage_id, tasks)"
                " SELECT k.corpus_id, k.service_id, k.task_status, u.id, count(*) FROM corpora_taskpackage k"
                " JOIN corpora_packageusage u ON (u.kind, u.package, u.flags) = (k.kind, k.package, k.flags)"
                " GROUP BY 1, 2, 3, 4",
                "UPDATE corpora_snapshotpackage s SET tally_flags = t.f, tally_statuses = t.s, tally_tasks = t.n FROM ("
                "  SELECT g.snapshot_id, g.kind, g.package, array_agg(g.flags ORDER BY g.flags, g.task_status) AS f,"
                "   array_agg(g.task_status ORDER BY g.flags, g.task_status) AS s,"
                "   array_agg(g.n ORDER BY g.flags, g.task_status) AS n FROM ("
                "    SELECT p.snapshot_id, p.kind, p.package, u.flags, u.task_status, count(*)::integer AS n"
                "    FROM corpora_snapshotpackage p, unnest(p.statuses, p.flags) AS u(task_status, flags)"
                "    GROUP BY 1, 2, 3, 4, 5) g GROUP BY 1, 2, 3) t"
                " WHERE (s.snapshot_id, s.kind, s.package) = (t.snapshot_id, t.kind, t.package)",
                "UPDATE corpora_snapshotpackage s SET document_ids = coalesce(k.d, '{}'),"
                " statuses = coalesce(k.s, '{}'), flags = coalesce(k.f, '{}') FROM ("
                "  SELECT p.snapshot_id, p.kind, p.package,"
                "   array_agg(u.document_id ORDER BY u.document_id) FILTER (WHERE u.flags >= 4) AS d,"
                "   array_agg(u.task_status ORDER BY u.document_id) FILTER (WHERE u.flags >= 4) AS s,"
                "   array_agg(u.flags ORDER BY u.document_id) FILTER (WHERE u.flags >= 4) AS f"
                "  FROM corpora_snapshotpackage p,"
                "   unnest(p.document_ids, p.statuses, p.flags) AS u(document_id, task_status, flags)"
                "  GROUP BY 1, 2, 3) k"
                " WHERE (s.snapshot_id, s.kind, s.package) = (k.snapshot_id, k.kind, k.package)",
            ],
            migrations.RunSQL.noop,
        ),
    ]
