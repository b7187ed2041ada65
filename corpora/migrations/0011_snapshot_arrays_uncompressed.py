"""A snapshot's status arrays are stored out of line without compression (STORAGE EXTERNAL): compressing
the 22 MB of document ids and 5.6 MB of statuses of arXiv's 2.8 million tasks took 2.3 s of the
snapshot's 9.5 s, in the transaction that closes a run, and every diff read them back through the
decompressor. They take 2.5 times the space compressed (9.1 and 1.0 MB): docs/decisions/snapshots.md. Rows
written before keep their compressed values, which read as before."""

from django.db import migrations

FORWARD = (
    "ALTER TABLE runs_snapshot ALTER COLUMN document_ids SET STORAGE EXTERNAL,"
    " ALTER COLUMN statuses SET STORAGE EXTERNAL"
)
REVERSE = (
    "ALTER TABLE runs_snapshot ALTER COLUMN document_ids SET STORAGE EXTENDED,"
    " ALTER COLUMN statuses SET STORAGE EXTENDED"
)


class Migration(migrations.Migration):
    dependencies = [
        ("corpora", "0010_telemetry_task_todo_since"),
    ]

    operations = [migrations.RunSQL(FORWARD, REVERSE)]
