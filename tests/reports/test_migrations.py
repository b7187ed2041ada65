"""The migration that gives every log message its task's status fills existing messages from their
tasks, in place, and leaves the report index leading with the status."""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

BEFORE = [("reports", "0007_runtime_counts")]
AFTER = [("reports", "0008_logmessage_task_status")]


def _migrate(targets: list[tuple[str, str]]) -> None:
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)


@pytest.mark.django_db(transaction=True)
def test_existing_messages_take_their_tasks_status_and_orphans_go(corpus_root):
    from tests.corpora.helpers import activated, imported

    imported(corpus_root, "c", documents=3)
    activated("c")
    _migrate(BEFORE)
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT id, corpus_id, service_id FROM corpora_task WHERE status = 0 ORDER BY id")
            tasks = cursor.fetchall()
            for (task_id, _, _), status in zip(tasks, (-2, -3, -4), strict=True):
                cursor.execute("UPDATE corpora_task SET status = %s WHERE id = %s", [status, task_id])
            rows = [(t, c, s, "warning", "x", "y") for t, c, s in tasks for _ in range(2)]
            rows.append((10**12, tasks[0][1], tasks[0][2], "error", "orphan", "gone"))  # its task does not exist
            cursor.executemany(
                "INSERT INTO reports_logmessage (task_id, corpus_id, service_id, severity, category, what, details)"
                " VALUES (%s, %s, %s, %s, %s, %s, '')",
                rows,
            )
    finally:
        _migrate(AFTER)
    with connection.cursor() as cursor:
        cursor.execute("SELECT task_id, task_status FROM reports_logmessage ORDER BY id")
        assert cursor.fetchall() == [(t, s) for (t, _, _), s in zip(tasks, (-2, -3, -4), strict=True) for _ in range(2)]
        cursor.execute("SELECT indexdef FROM pg_indexes WHERE indexname = 'logmessage_report_status'")
        assert "(corpus_id, service_id, task_status, severity, category, what, task_id)" in cursor.fetchone()[0]
        cursor.execute("SELECT count(*) FROM pg_indexes WHERE indexname = 'logmessage_report_task'")
        assert cursor.fetchone()[0] == 0
