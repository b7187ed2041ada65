"""The migration that gives every log message its task's status fills existing messages from their
tasks, in place, and leaves the report index leading with the status; the next one moves the messages
into one partition per status, and back."""

from __future__ import annotations

import pytest
from django.db import connection

from tests.support import migrate as _migrate

BEFORE = [("reports", "0007_runtime_counts")]
AFTER = [("reports", "0008_logmessage_task_status")]
PARTITIONED = [("reports", "0009_logmessage_partitioned_by_status")]


def _messages() -> list[tuple]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT id, tableoid::regclass::text, task_id, task_status, severity, category, what, details"
            " FROM reports_logmessage ORDER BY id"
        )
        return cursor.fetchall()


def _rows(messages: list[tuple]) -> list[tuple]:
    """The messages without the table each lies in."""
    return [row[:1] + row[2:] for row in messages]


def _layout() -> tuple[str, list[str], list[str]]:
    """The table's kind (r plain, p partitioned), its partitions, and its indexes with their columns."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT relkind FROM pg_class WHERE oid = 'reports_logmessage'::regclass")
        kind = cursor.fetchone()[0]
        cursor.execute(
            "SELECT inhrelid::regclass::text FROM pg_inherits WHERE inhparent = 'reports_logmessage'::regclass"
            " ORDER BY 1"
        )
        partitions = [row[0] for row in cursor.fetchall()]
        cursor.execute(
            "SELECT indexrelid::regclass::text || ' '"
            " || substring(pg_get_indexdef(indexrelid) FROM 'USING btree (.*)$')"
            " FROM pg_index WHERE indrelid = 'reports_logmessage'::regclass ORDER BY 1"
        )
        indexes = [row[0] for row in cursor.fetchall()]
    return kind, partitions, indexes


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
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT task_id, task_status FROM reports_logmessage ORDER BY id")
            statuses = (-2, -3, -4)
            assert cursor.fetchall() == [(t, s) for (t, _, _), s in zip(tasks, statuses, strict=True) for _ in range(2)]
            cursor.execute("SELECT indexdef FROM pg_indexes WHERE indexname = 'logmessage_report_status'")
            assert "(corpus_id, service_id, task_status, severity, category, what, task_id)" in cursor.fetchone()[0]
            cursor.execute("SELECT count(*) FROM pg_indexes WHERE indexname = 'logmessage_report_task'")
            assert cursor.fetchone()[0] == 0
    finally:
        _migrate()


@pytest.mark.django_db(transaction=True)
def test_messages_move_into_their_status_partitions_and_back_keeping_ids_and_the_sequence():
    _migrate(AFTER)
    try:
        with connection.cursor() as cursor:
            cursor.executemany(
                "INSERT INTO reports_logmessage (task_id, corpus_id, service_id, task_status, severity, category,"
                " what, details) VALUES (%s, 1, 1, %s, 'error', 'c', 'w', %s)",
                [(task, status, f"d{task}") for task, status in ((1, -3), (2, -1), (3, -5), (4, -3), (5, 9))],
            )
        before = _messages()
        plain = _layout()
        assert plain[0] == "r" and plain[1] == []
        _migrate(PARTITIONED)
        after = _messages()
        assert _rows(after) == _rows(before)
        assert [row[1] for row in after] == [
            "reports_logmessage_error",
            "reports_logmessage_no_problem",
            "reports_logmessage_invalid",
            "reports_logmessage_error",
            "reports_logmessage_other",  # a status no partition names is kept, not refused
        ]
        kind, partitions, indexes = _layout()
        assert kind == "p" and len(partitions) == 6
        assert indexes == [
            "logmessage_report_status (corpus_id, service_id, task_status, severity, category, what, task_id)",
            "logmessage_task (task_id)",
            "reports_logmessage_pkey (id, task_status)",
        ]
        with connection.cursor() as cursor:  # the ids go on from where the old sequence stopped
            cursor.execute(
                "INSERT INTO reports_logmessage (task_id, corpus_id, service_id, task_status, severity, category,"
                " what, details) VALUES (6, 1, 1, -2, 'warning', 'c', 'w', '') RETURNING id"
            )
            assert cursor.fetchone()[0] == before[-1][0] + 1
        moved = _messages()
        _migrate(AFTER)  # and back: one plain table with the same rows and indexes
        assert _rows(_messages()) == _rows(moved)
        assert _layout() == (
            "r",
            [],
            [index.replace("(id, task_status)", "(id)") for index in indexes],
        )
    finally:
        _migrate()
