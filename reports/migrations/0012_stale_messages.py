# ruff: noqa: S608  (the SQL here is this module's own constants)
"""A rerun retires its tasks' messages instead of deleting their rows in its transaction
(docs/decisions/rerun.md): the retired tasks are listed here until a purge deletes their rows,
and the messages view leaves them out meanwhile. The reverse deletes the rows of retired messages first,
so the view and the tallies agree again without the list."""

from django.db import migrations, models

# Migration 0010's view, to which the forward adds the filter.
UNFOLDED = """
CREATE OR REPLACE VIEW reports_logmessage AS
SELECT x.task_id, s.place::integer AS position, x.corpus_id::bigint AS corpus_id,
       x.service_id::bigint AS service_id, x.task_status, c.severity, c.category, c.what,
       x.details[s.place] AS details
  FROM reports_taskmessages x
 CROSS JOIN LATERAL unnest(x.sequence) WITH ORDINALITY AS s(class_index, place)
  JOIN reports_messageclass c ON c.id = x.classes[s.class_index]
"""
VIEW = UNFOLDED + " WHERE NOT EXISTS (SELECT FROM reports_stalemessages z WHERE z.task_id = x.task_id);"

# The old view, once the retired rows are gone.
REVERSE = (
    "DELETE FROM reports_taskclass p USING reports_stalemessages z WHERE p.task_id = z.task_id;"
    " DELETE FROM reports_taskmessages x USING reports_stalemessages z WHERE x.task_id = z.task_id;" + UNFOLDED + ";"
)


class Migration(migrations.Migration):
    dependencies = [
        ("reports", "0011_runtime_bins"),
    ]

    operations = [
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
        migrations.RunSQL(VIEW, REVERSE),
    ]
