# ruff: noqa: S608  (the SQL here is assembled from this module's own constants only)
"""Log messages move from a row each to a row per task (docs/decisions/message-storage.md): a dictionary of
message classes and their rollups, a row per task with its classes and its
messages in log order, a row per (task, class) under the report index, and tallies per (pair, status,
class). The old table's name becomes a view that unfolds the task rows into messages, with the old
columns (a message's place in its task's log replaces its id).

The migration converts the messages in place, in its transaction and set-based; the reverse builds the
partitioned table of migration 0009 again from the task rows. The statements are frozen here rather
than taken from corpora.lifecycle, which writes the same tables, because a migration must keep doing
what it did when the code changes."""

import django.contrib.postgres.fields
import django.db.models.deletion
from django.db import migrations, models

SEVERITY_CHOICES = [("info", "Info"), ("warning", "Warning"), ("error", "Error"), ("fatal", "Fatal")]

# The arrays of a task row are mostly compressed; lz4 where the server has it (pglz otherwise).
COMPRESSION = """
DO $$ BEGIN
  IF EXISTS (SELECT 1 FROM pg_settings WHERE name = 'default_toast_compression' AND 'lz4' = ANY(enumvals)) THEN
    ALTER TABLE reports_taskmessages ALTER COLUMN details SET COMPRESSION lz4,
      ALTER COLUMN sequence SET COMPRESSION lz4, ALTER COLUMN classes SET COMPRESSION lz4,
      ALTER COLUMN counts SET COMPRESSION lz4;
  END IF;
END $$;
"""

# Old rows to task rows. Classes and rollups first (level 0 a class, 1 a category, 2 a severity), then
# each task's classes in the order they first appear, its rollups, its messages in id order, the pairs
# and the tallies.
FORWARD = """
INSERT INTO reports_messageclass (level, severity, category, what)
SELECT CASE WHEN grouping(category) = 1 THEN 2 WHEN grouping(what) = 1 THEN 1 ELSE 0 END,
       severity, coalesce(category, ''), coalesce(what, '')
  FROM reports_logmessage GROUP BY GROUPING SETS ((severity, category, what), (severity, category), (severity))
 ORDER BY 1, 2, 3, 4;

CREATE TEMP TABLE migrate_class ON COMMIT DROP AS
SELECT k.task_id, k.class_id, k.messages, row_number() OVER (PARTITION BY k.task_id ORDER BY k.first_id) AS place
  FROM (SELECT m.task_id, c.id AS class_id, min(m.id) AS first_id, count(*)::integer AS messages
          FROM reports_logmessage m
          JOIN reports_messageclass c
            ON c.level = 0 AND c.severity = m.severity AND c.category = m.category AND c.what = m.what
         GROUP BY m.task_id, c.id) k;

CREATE TEMP TABLE migrate_rollup ON COMMIT DROP AS
SELECT r.task_id, c.id AS class_id, r.messages
  FROM (SELECT task_id, severity, coalesce(category, '') AS category, count(*)::integer AS messages,
               CASE WHEN grouping(category) = 1 THEN 2 ELSE 1 END AS level
          FROM reports_logmessage GROUP BY GROUPING SETS ((task_id, severity, category), (task_id, severity))) r
  JOIN reports_messageclass c ON c.level = r.level AND c.severity = r.severity AND c.category = r.category
   AND c.what = '';

INSERT INTO reports_taskmessages
       (task_id, corpus_id, service_id, task_status, classes, counts, rollups, rollup_counts, sequence, details)
SELECT s.task_id, s.corpus_id, s.service_id, s.task_status, k.classes, k.counts, r.rollups, r.counts,
       s.sequence, s.details
  FROM (SELECT m.task_id, min(m.corpus_id) AS corpus_id, min(m.service_id) AS service_id,
               min(m.task_status) AS task_status, array_agg(p.place::integer ORDER BY m.id) AS sequence,
               array_agg(m.details::text ORDER BY m.id) AS details
          FROM reports_logmessage m
          JOIN reports_messageclass c
            ON c.level = 0 AND c.severity = m.severity AND c.category = m.category AND c.what = m.what
          JOIN migrate_class p ON p.task_id = m.task_id AND p.class_id = c.id
         GROUP BY m.task_id) s
  JOIN (SELECT task_id, array_agg(class_id ORDER BY place) AS classes, array_agg(messages ORDER BY place) AS counts
          FROM migrate_class GROUP BY task_id) k ON k.task_id = s.task_id
  JOIN (SELECT task_id, array_agg(class_id ORDER BY class_id) AS rollups,
               array_agg(messages ORDER BY class_id) AS counts
          FROM migrate_rollup GROUP BY task_id) r ON r.task_id = s.task_id
 ORDER BY s.task_id;

INSERT INTO reports_taskclass (task_id, corpus_id, service_id, message_class_id, task_status)
SELECT x.task_id, x.corpus_id, x.service_id, u.class_id, x.task_status
  FROM reports_taskmessages x, unnest(x.classes) AS u(class_id)
 ORDER BY x.task_id;

INSERT INTO reports_messagetally (corpus_id, service_id, task_status, message_class_id, tasks, messages)
SELECT x.corpus_id, x.service_id, x.task_status, u.class_id, count(*), sum(u.messages)
  FROM reports_taskmessages x, unnest(x.classes || x.rollups, x.counts || x.rollup_counts) AS u(class_id, messages)
 GROUP BY 1, 2, 3, 4;

DROP TABLE reports_logmessage;
"""

# Every message of every task row, in log order: the old table's columns, a message's place in its
# task's log in place of its id.
VIEW = """
CREATE VIEW reports_logmessage AS
SELECT x.task_id, s.place::integer AS position, x.corpus_id::bigint AS corpus_id,
       x.service_id::bigint AS service_id, x.task_status, c.severity, c.category, c.what,
       x.details[s.place] AS details
  FROM reports_taskmessages x
 CROSS JOIN LATERAL unnest(x.sequence) WITH ORDINALITY AS s(class_index, place)
  JOIN reports_messageclass c ON c.id = x.classes[s.class_index];
"""

# The reverse: migration 0009's partitioned table, filled from the view in task and log order.
PARTITIONS = {"no_problem": -1, "warning": -2, "error": -3, "fatal": -4, "invalid": -5}
REVERSE = (
    "ALTER VIEW reports_logmessage RENAME TO reports_logmessage_view;"
    " CREATE TABLE reports_logmessage (id bigint GENERATED BY DEFAULT AS IDENTITY, severity varchar(10) NOT NULL,"
    " category varchar(100) NOT NULL, what varchar(200) NOT NULL, details varchar(2000) NOT NULL,"
    " corpus_id bigint NOT NULL, service_id bigint NOT NULL, task_id bigint NOT NULL,"
    " task_status smallint NOT NULL) PARTITION BY LIST (task_status);"
    + "".join(
        f" CREATE TABLE reports_logmessage_{name} PARTITION OF reports_logmessage FOR VALUES IN ({status});"
        for name, status in PARTITIONS.items()
    )
    + " CREATE TABLE reports_logmessage_other PARTITION OF reports_logmessage DEFAULT;"
    " INSERT INTO reports_logmessage (severity, category, what, details, corpus_id, service_id, task_id, task_status)"
    " SELECT severity, category, what, details, corpus_id, service_id, task_id, task_status"
    " FROM reports_logmessage_view ORDER BY task_id, position;"
    " DROP VIEW reports_logmessage_view;"
    " ALTER TABLE reports_logmessage ADD CONSTRAINT reports_logmessage_pkey PRIMARY KEY (id, task_status);"
    " CREATE INDEX logmessage_task ON reports_logmessage (task_id);"
    " CREATE INDEX logmessage_report_status ON reports_logmessage"
    " (corpus_id, service_id, task_status, severity, category, what, task_id);"
    " ANALYZE reports_logmessage;"
)


class Migration(migrations.Migration):
    dependencies = [
        ("corpora", "0008_pair_owns_runs"),
        ("reports", "0009_logmessage_partitioned_by_status"),
    ]

    operations = [
        migrations.CreateModel(
            name="MessageClass",
            fields=[
                ("id", models.AutoField(primary_key=True, serialize=False)),
                ("level", models.SmallIntegerField()),
                ("severity", models.CharField(choices=SEVERITY_CHOICES, max_length=10)),
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
                ("classes", django.contrib.postgres.fields.ArrayField(base_field=models.IntegerField(), size=None)),
                ("counts", django.contrib.postgres.fields.ArrayField(base_field=models.IntegerField(), size=None)),
                ("rollups", django.contrib.postgres.fields.ArrayField(base_field=models.IntegerField(), size=None)),
                (
                    "rollup_counts",
                    django.contrib.postgres.fields.ArrayField(base_field=models.IntegerField(), size=None),
                ),
                ("sequence", django.contrib.postgres.fields.ArrayField(base_field=models.IntegerField(), size=None)),
                ("details", django.contrib.postgres.fields.ArrayField(base_field=models.TextField(), size=None)),
            ],
            options={"db_table": "reports_taskmessages"},
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
                ("corpus_id", models.IntegerField()),
                ("service_id", models.IntegerField()),
                ("message_class_id", models.IntegerField()),
                ("task_status", models.SmallIntegerField()),
            ],
            options={"indexes": [models.Index(fields=["task_id"], name="taskclass_task")]},
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
        migrations.RunSQL(COMPRESSION, reverse_sql=migrations.RunSQL.noop),
        migrations.SeparateDatabaseAndState(
            database_operations=[migrations.RunSQL(FORWARD + VIEW, reverse_sql=REVERSE)],
            state_operations=[
                migrations.DeleteModel(name="LogMessage"),
                migrations.CreateModel(
                    name="LogMessage",
                    fields=[
                        (
                            "pk",
                            models.CompositePrimaryKey(
                                "task_id", "position", blank=True, editable=False, primary_key=True, serialize=False
                            ),
                        ),
                        (
                            "task",
                            models.ForeignKey(
                                db_constraint=False,
                                on_delete=django.db.models.deletion.DO_NOTHING,
                                to="corpora.task",
                            ),
                        ),
                        ("position", models.IntegerField()),
                        (
                            "corpus",
                            models.ForeignKey(
                                db_constraint=False,
                                on_delete=django.db.models.deletion.DO_NOTHING,
                                to="corpora.corpus",
                            ),
                        ),
                        (
                            "service",
                            models.ForeignKey(
                                db_constraint=False,
                                on_delete=django.db.models.deletion.DO_NOTHING,
                                to="services.service",
                            ),
                        ),
                        ("task_status", models.SmallIntegerField()),
                        ("severity", models.CharField(choices=SEVERITY_CHOICES, max_length=10)),
                        ("category", models.CharField(max_length=100)),
                        ("what", models.CharField(max_length=200)),
                        ("details", models.CharField(blank=True, max_length=2000)),
                    ],
                    options={"db_table": "reports_logmessage", "managed": False},
                ),
            ],
        ),
    ]
