"""The tables that corpora's modules write join corpora: the log messages (task rows, (task, class)
rows, stale messages, tallies, the class dictionary and the messages view), the runtimes with their
trigger-kept counts and bins, the report rollup (grains and built slices), the runs' telemetry and the
diffs of snapshots leave the state of reports and runs (reports 0014, runs 0005), and every table of
corpora takes corpora's name: reports_* and runs_* become corpora_*, with their indexes, constraints
and sequences, whose names begin with the table's. No row is touched. The runtime-count trigger
function names its tables, so it is written again with the new names (docs/architecture.md, "Each table
sits with its writer")."""

# ruff: noqa: S608  (the SQL here is this module's own constants)
import django.contrib.postgres.fields
import django.db.models.deletion
from django.db import migrations, models

RENAMED = [
    ("reports_messageclass", "corpora_messageclass"),
    ("reports_taskmessages", "corpora_taskmessages"),
    ("reports_taskclass", "corpora_taskclass"),
    ("reports_stalemessages", "corpora_stalemessages"),
    ("reports_messagetally", "corpora_messagetally"),
    ("reports_taskruntime", "corpora_taskruntime"),
    ("reports_runtimecount", "corpora_runtimecount"),
    ("reports_runtimebin", "corpora_runtimebin"),
    ("reports_reportgrain", "corpora_reportgrain"),
    ("reports_grainslice", "corpora_grainslice"),
    ("runs_snapshotdiff", "corpora_snapshotdiff"),
    ("runs_taskdiff", "corpora_taskdiff"),
    ("runs_telemetrybin", "corpora_telemetrybin"),
    ("runs_telemetryminute", "corpora_telemetryminute"),
    ("runs_run", "corpora_run"),
    ("runs_snapshot", "corpora_snapshot"),
    ("runs_snapshotclass", "corpora_snapshotclass"),
    ("runs_snapshotmembers", "corpora_snapshotmembers"),
]
VIEWS = [("reports_logmessage", "corpora_logmessage")]

# Renames a table, then the constraints, indexes and sequences of it whose names begin with its old name
# (a constraint backed by an index renames its index too). Fixed names (run_newest, ...) stay.
RENAME_FUNCTION = """
CREATE OR REPLACE FUNCTION pg_temp.ccs_table_rename(old text, new text) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
  item record;
BEGIN
  EXECUTE format('ALTER TABLE %I RENAME TO %I', old, new);
  FOR item IN SELECT conname FROM pg_constraint WHERE conrelid = new::regclass AND starts_with(conname, old || '_')
  LOOP
    EXECUTE format('ALTER TABLE %I RENAME CONSTRAINT %I TO %I', new, item.conname,
                   new || substr(item.conname, length(old) + 1));
  END LOOP;
  FOR item IN SELECT c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
               WHERE i.indrelid = new::regclass AND starts_with(c.relname, old || '_')
  LOOP
    EXECUTE format('ALTER INDEX %I RENAME TO %I', item.relname, new || substr(item.relname, length(old) + 1));
  END LOOP;
  FOR item IN SELECT s.relname FROM pg_depend d JOIN pg_class s ON s.oid = d.objid
               WHERE d.refobjid = new::regclass AND s.relkind = 'S' AND starts_with(s.relname, old || '_')
  LOOP
    EXECUTE format('ALTER SEQUENCE %I RENAME TO %I', item.relname, new || substr(item.relname, length(old) + 1));
  END LOOP;
END
$$;
"""


def _renames(pairs: list[tuple[str, str]], views: list[tuple[str, str]]) -> str:
    tables = "".join(f"SELECT pg_temp.ccs_table_rename('{old}', '{new}');\n" for old, new in pairs)
    return RENAME_FUNCTION + tables + "".join(f"ALTER VIEW {old} RENAME TO {new};\n" for old, new in views)


# The runtime counts and bins, kept by statement-level triggers on the runtimes (reports 0007, 0011).
RUNTIME_COUNT_FUNCTION = """
CREATE OR REPLACE FUNCTION ccs_runtimecount_apply() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP IN ('DELETE', 'UPDATE') THEN
    INSERT INTO {counts} (service_id, runtime_ms, count)
      SELECT service_id, runtime_ms, -count(*) FROM old_rows GROUP BY 1, 2 ORDER BY 1, 2
    ON CONFLICT (service_id, runtime_ms) DO UPDATE SET count = {counts}.count + EXCLUDED.count;
    INSERT INTO {bins} (service_id, bin, count, total_ms)
      SELECT service_id, runtime_ms / 50, -count(*), -sum(runtime_ms) FROM old_rows GROUP BY 1, 2 ORDER BY 1, 2
    ON CONFLICT (service_id, bin) DO UPDATE SET count = {bins}.count + EXCLUDED.count,
      total_ms = {bins}.total_ms + EXCLUDED.total_ms;
  END IF;
  IF TG_OP IN ('INSERT', 'UPDATE') THEN
    INSERT INTO {counts} (service_id, runtime_ms, count)
      SELECT service_id, runtime_ms, count(*) FROM new_rows GROUP BY 1, 2 ORDER BY 1, 2
    ON CONFLICT (service_id, runtime_ms) DO UPDATE SET count = {counts}.count + EXCLUDED.count;
    INSERT INTO {bins} (service_id, bin, count, total_ms)
      SELECT service_id, runtime_ms / 50, count(*), sum(runtime_ms) FROM new_rows GROUP BY 1, 2 ORDER BY 1, 2
    ON CONFLICT (service_id, bin) DO UPDATE SET count = {bins}.count + EXCLUDED.count,
      total_ms = {bins}.total_ms + EXCLUDED.total_ms;
  END IF;
  RETURN NULL;
END
$$;
"""

FORWARD = _renames(RENAMED, VIEWS) + RUNTIME_COUNT_FUNCTION.format(
    counts="corpora_runtimecount", bins="corpora_runtimebin"
)
REVERSE = _renames([(new, old) for old, new in RENAMED], [(new, old) for old, new in VIEWS]) + (
    RUNTIME_COUNT_FUNCTION.format(counts="reports_runtimecount", bins="reports_runtimebin")
)


class Migration(migrations.Migration):
    dependencies = [
        ("corpora", "0013_document_name_folded_index"),
        ("reports", "0013_taskclass_document"),
        ("runs", "0004_telemetry"),
        ("services", "0007_in_flight"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[migrations.RunSQL(FORWARD, REVERSE)],
            state_operations=[
                migrations.CreateModel(
                    name="LogMessage",
                    fields=[
                        (
                            "pk",
                            models.CompositePrimaryKey(
                                "task_id", "position", blank=True, editable=False, primary_key=True, serialize=False
                            ),
                        ),
                        ("position", models.IntegerField()),
                        ("task_status", models.SmallIntegerField()),
                        (
                            "severity",
                            models.CharField(
                                choices=[
                                    ("info", "Info"),
                                    ("warning", "Warning"),
                                    ("error", "Error"),
                                    ("fatal", "Fatal"),
                                ],
                                max_length=10,
                            ),
                        ),
                        ("category", models.CharField(max_length=100)),
                        ("what", models.CharField(max_length=200)),
                        ("details", models.CharField(blank=True, max_length=2000)),
                    ],
                    options={
                        "managed": False,
                    },
                ),
                migrations.CreateModel(
                    name="MessageTally",
                    fields=[
                        (
                            "pk",
                            models.CompositePrimaryKey(
                                "corpus_id",
                                "service_id",
                                "task_status",
                                "message_class_id",
                                blank=True,
                                editable=False,
                                primary_key=True,
                                serialize=False,
                            ),
                        ),
                        ("corpus_id", models.IntegerField()),
                        ("service_id", models.IntegerField()),
                        ("task_status", models.SmallIntegerField()),
                        ("message_class_id", models.IntegerField()),
                        ("tasks", models.BigIntegerField()),
                        ("messages", models.BigIntegerField()),
                    ],
                ),
                migrations.CreateModel(
                    name="TaskMessages",
                    fields=[
                        (
                            "task",
                            models.OneToOneField(
                                db_constraint=False,
                                on_delete=django.db.models.deletion.DO_NOTHING,
                                primary_key=True,
                                related_name="+",
                                serialize=False,
                                to="corpora.task",
                            ),
                        ),
                        ("corpus_id", models.IntegerField()),
                        ("service_id", models.IntegerField()),
                        ("task_status", models.SmallIntegerField()),
                        (
                            "classes",
                            django.contrib.postgres.fields.ArrayField(base_field=models.IntegerField(), size=None),
                        ),
                        (
                            "counts",
                            django.contrib.postgres.fields.ArrayField(base_field=models.IntegerField(), size=None),
                        ),
                        (
                            "rollups",
                            django.contrib.postgres.fields.ArrayField(base_field=models.IntegerField(), size=None),
                        ),
                        (
                            "rollup_counts",
                            django.contrib.postgres.fields.ArrayField(base_field=models.IntegerField(), size=None),
                        ),
                        (
                            "sequence",
                            django.contrib.postgres.fields.ArrayField(base_field=models.IntegerField(), size=None),
                        ),
                        (
                            "details",
                            django.contrib.postgres.fields.ArrayField(base_field=models.TextField(), size=None),
                        ),
                    ],
                ),
                migrations.AlterModelTable(
                    name="run",
                    table=None,
                ),
                migrations.AlterModelTable(
                    name="snapshot",
                    table=None,
                ),
                migrations.AlterModelTable(
                    name="snapshotclass",
                    table=None,
                ),
                migrations.AlterModelTable(
                    name="snapshotmembers",
                    table=None,
                ),
                migrations.CreateModel(
                    name="MessageClass",
                    fields=[
                        ("id", models.AutoField(primary_key=True, serialize=False)),
                        ("level", models.SmallIntegerField()),
                        (
                            "severity",
                            models.CharField(
                                choices=[
                                    ("info", "Info"),
                                    ("warning", "Warning"),
                                    ("error", "Error"),
                                    ("fatal", "Fatal"),
                                ],
                                max_length=10,
                            ),
                        ),
                        ("category", models.CharField(max_length=100)),
                        ("what", models.CharField(max_length=200)),
                    ],
                    options={
                        "constraints": [
                            models.UniqueConstraint(
                                fields=("level", "severity", "category", "what"), name="messageclass_unique_key"
                            )
                        ],
                    },
                ),
                migrations.CreateModel(
                    name="SnapshotDiff",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                            ),
                        ),
                        ("matrix", models.JSONField()),
                        ("changed", models.IntegerField()),
                        ("rows_ready", models.BooleanField(default=False)),
                        ("created_at", models.DateTimeField(auto_now_add=True)),
                        (
                            "current",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.DO_NOTHING, related_name="+", to="corpora.snapshot"
                            ),
                        ),
                        (
                            "previous",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.DO_NOTHING, related_name="+", to="corpora.snapshot"
                            ),
                        ),
                    ],
                ),
                migrations.CreateModel(
                    name="StaleMessages",
                    fields=[
                        ("task_id", models.BigIntegerField(primary_key=True, serialize=False)),
                        ("corpus_id", models.IntegerField()),
                        ("service_id", models.IntegerField()),
                    ],
                    options={
                        "indexes": [models.Index(fields=["corpus_id", "service_id"], name="stalemessages_pair")],
                    },
                ),
                migrations.CreateModel(
                    name="TaskClass",
                    fields=[
                        (
                            "pk",
                            models.CompositePrimaryKey(
                                "corpus_id",
                                "service_id",
                                "task_status",
                                "message_class_id",
                                "task_id",
                                blank=True,
                                editable=False,
                                primary_key=True,
                                serialize=False,
                            ),
                        ),
                        ("task_id", models.BigIntegerField()),
                        ("document_id", models.BigIntegerField()),
                        ("corpus_id", models.IntegerField()),
                        ("service_id", models.IntegerField()),
                        ("message_class_id", models.IntegerField()),
                        ("task_status", models.SmallIntegerField()),
                    ],
                    options={
                        "indexes": [models.Index(fields=["task_id"], name="taskclass_task")],
                    },
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
                        ("previous_status", models.SmallIntegerField()),
                        ("current_status", models.SmallIntegerField()),
                        ("document_id", models.BigIntegerField()),
                        (
                            "diff",
                            models.ForeignKey(
                                db_constraint=False,
                                db_index=False,
                                on_delete=django.db.models.deletion.DO_NOTHING,
                                related_name="+",
                                to="corpora.snapshotdiff",
                            ),
                        ),
                    ],
                ),
                migrations.CreateModel(
                    name="TaskRuntime",
                    fields=[
                        (
                            "task",
                            models.OneToOneField(
                                db_constraint=False,
                                on_delete=django.db.models.deletion.DO_NOTHING,
                                primary_key=True,
                                serialize=False,
                                to="corpora.task",
                            ),
                        ),
                        ("runtime_ms", models.IntegerField()),
                        (
                            "corpus",
                            models.ForeignKey(
                                db_constraint=False,
                                db_index=False,
                                on_delete=django.db.models.deletion.DO_NOTHING,
                                to="corpora.corpus",
                            ),
                        ),
                        (
                            "service",
                            models.ForeignKey(
                                db_constraint=False,
                                db_index=False,
                                on_delete=django.db.models.deletion.DO_NOTHING,
                                to="services.service",
                            ),
                        ),
                    ],
                ),
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
                migrations.CreateModel(
                    name="GrainSlice",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                            ),
                        ),
                        ("severity", models.CharField(max_length=12)),
                        ("built_at", models.DateTimeField(auto_now_add=True)),
                        ("build_ms", models.IntegerField(default=0)),
                        (
                            "corpus",
                            models.ForeignKey(
                                db_index=False, on_delete=django.db.models.deletion.DO_NOTHING, to="corpora.corpus"
                            ),
                        ),
                        (
                            "service",
                            models.ForeignKey(
                                db_index=False, on_delete=django.db.models.deletion.DO_NOTHING, to="services.service"
                            ),
                        ),
                    ],
                    options={
                        "constraints": [
                            models.UniqueConstraint(
                                fields=("corpus", "service", "severity"), name="grainslice_unique_key"
                            )
                        ],
                    },
                ),
                migrations.CreateModel(
                    name="ReportGrain",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                            ),
                        ),
                        ("severity", models.CharField(max_length=12)),
                        ("category", models.CharField(max_length=100, null=True)),
                        ("what", models.CharField(max_length=200, null=True)),
                        ("task_count", models.BigIntegerField()),
                        ("message_count", models.BigIntegerField()),
                        (
                            "corpus",
                            models.ForeignKey(
                                db_constraint=False,
                                db_index=False,
                                on_delete=django.db.models.deletion.DO_NOTHING,
                                to="corpora.corpus",
                            ),
                        ),
                        (
                            "service",
                            models.ForeignKey(
                                db_constraint=False,
                                db_index=False,
                                on_delete=django.db.models.deletion.DO_NOTHING,
                                to="services.service",
                            ),
                        ),
                    ],
                    options={
                        "indexes": [
                            models.Index(
                                fields=["corpus", "service", "severity", "category", "-task_count"],
                                name="grain_slice_by_tasks",
                            )
                        ],
                    },
                ),
                migrations.CreateModel(
                    name="RuntimeBin",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                            ),
                        ),
                        ("bin", models.IntegerField()),
                        ("count", models.BigIntegerField(default=0)),
                        ("total_ms", models.BigIntegerField(default=0)),
                        (
                            "service",
                            models.ForeignKey(
                                db_constraint=False,
                                db_index=False,
                                on_delete=django.db.models.deletion.DO_NOTHING,
                                to="services.service",
                            ),
                        ),
                    ],
                    options={
                        "constraints": [
                            models.UniqueConstraint(fields=("service", "bin"), name="runtimebin_unique_key")
                        ],
                    },
                ),
                migrations.CreateModel(
                    name="RuntimeCount",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                            ),
                        ),
                        ("runtime_ms", models.IntegerField()),
                        ("count", models.BigIntegerField(default=0)),
                        (
                            "service",
                            models.ForeignKey(
                                db_constraint=False,
                                db_index=False,
                                on_delete=django.db.models.deletion.DO_NOTHING,
                                to="services.service",
                            ),
                        ),
                    ],
                    options={
                        "constraints": [
                            models.UniqueConstraint(fields=("service", "runtime_ms"), name="runtimecount_unique_key")
                        ],
                    },
                ),
                migrations.AddConstraint(
                    model_name="snapshotdiff",
                    constraint=models.UniqueConstraint(fields=("previous", "current"), name="snapshotdiff_unique_pair"),
                ),
                migrations.AddIndex(
                    model_name="taskruntime",
                    index=models.Index(fields=["corpus", "service", "-runtime_ms"], name="runtime_pair_slowest"),
                ),
                migrations.AddIndex(
                    model_name="taskruntime",
                    index=models.Index(fields=["service", "-runtime_ms", "task"], name="runtime_service_slowest"),
                ),
            ],
        ),
    ]
