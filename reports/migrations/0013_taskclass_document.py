# ruff: noqa: S608  (the SQL here is this module's own constants)
"""(task, class) rows carry their task's document, and the report index carries it too (INCLUDE), so a
snapshot reads the documents of each warning, error or fatal class from that index alone, without
joining millions of (task, class) rows to the tasks (docs/decisions/message-classes-in-snapshots.md).

The table is copied once with the documents joined in, rather than updated row by row in place: one
sequential write instead of a second version of every row."""

from django.db import migrations, models

COLUMNS = "task_id, corpus_id, service_id, message_class_id, task_status"
KEY = "corpus_id, service_id, task_status, message_class_id, task_id"

FORWARD = f"""
CREATE TABLE reports_taskclass_new (LIKE reports_taskclass INCLUDING DEFAULTS INCLUDING STORAGE);
ALTER TABLE reports_taskclass_new ADD COLUMN document_id bigint NOT NULL;
INSERT INTO reports_taskclass_new ({COLUMNS}, document_id)
  SELECT p.task_id, p.corpus_id, p.service_id, p.message_class_id, p.task_status, t.document_id
  FROM reports_taskclass p JOIN corpora_task t ON t.id = p.task_id;
DROP TABLE reports_taskclass;
ALTER TABLE reports_taskclass_new RENAME TO reports_taskclass;
ALTER TABLE reports_taskclass ADD CONSTRAINT reports_taskclass_pkey PRIMARY KEY ({KEY}) INCLUDE (document_id);
CREATE INDEX taskclass_task ON reports_taskclass (task_id);
ANALYZE reports_taskclass;
"""

REVERSE = f"""
ALTER TABLE reports_taskclass DROP CONSTRAINT reports_taskclass_pkey;
ALTER TABLE reports_taskclass DROP COLUMN document_id;
ALTER TABLE reports_taskclass ADD CONSTRAINT reports_taskclass_pkey PRIMARY KEY ({KEY});
"""


class Migration(migrations.Migration):
    dependencies = [
        ("reports", "0012_stale_messages"),
        ("corpora", "0010_telemetry_task_todo_since"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[migrations.RunSQL(FORWARD, REVERSE)],
            state_operations=[
                migrations.AddField(
                    model_name="taskclass",
                    name="document_id",
                    field=models.BigIntegerField(),
                    preserve_default=False,
                ),
            ],
        ),
    ]
