"""Messages in tests: adding messages to a task through the one message writer, and what must hold
between the message tables (TaskMessages, TaskClass, TaskPackage, MessageTally, PackageTally) and the tasks,
as plain SQL recounts that the tests check after every kind of write."""

from __future__ import annotations

from django.db import connection, transaction

from corpora.message_store import messages_delete, messages_write
from corpora.models import LogMessage, Task


def messages_add(task: Task, *messages: tuple[str, str, str, str]) -> None:
    """Append (severity, category, what, details) messages to a task's log, with the task's current
    status, as a result with those lines would have written them."""
    task.refresh_from_db()
    with transaction.atomic(), connection.cursor() as cursor:
        kept = list(
            LogMessage.objects.filter(task=task)
            .order_by("position")
            .values_list("severity", "category", "what", "details")
        )
        messages_delete(cursor, [task.pk])
        messages_write(cursor, [(task.pk, task.corpus_id, task.service_id, task.status, [*kept, *messages])])


# Task rows whose messages a rerun retired: the tallies no longer count them, and the purge deletes them.
_LIVE = "NOT EXISTS (SELECT FROM corpora_stalemessages z WHERE z.task_id = x.task_id)"
_RECOUNT = f"""
SELECT x.corpus_id, x.service_id, x.task_status, u.class_id, count(*) AS tasks, sum(u.messages) AS messages
  FROM corpora_taskmessages x, unnest(x.classes || x.rollups, x.counts || x.rollup_counts) AS u(class_id, messages)
 WHERE {_LIVE}
 GROUP BY 1, 2, 3, 4
"""  # noqa: S608

CHECKS = {
    "a task row's status is not its task's": (
        "SELECT count(*) FROM corpora_taskmessages x LEFT JOIN corpora_task t ON t.id = x.task_id"  # noqa: S608
        " WHERE t.corpus_id IS DISTINCT FROM x.corpus_id OR t.service_id <> x.service_id"
        f" OR ({_LIVE} AND t.status <> x.task_status)"
    ),
    "retired messages are not a task row's, or their task is not in progress": (
        "SELECT count(*) FROM corpora_stalemessages z LEFT JOIN corpora_taskmessages x ON x.task_id = z.task_id"
        " LEFT JOIN corpora_task t ON t.id = z.task_id"
        " WHERE x.task_id IS NULL OR t.status IS NULL OR t.status BETWEEN -5 AND -1"
        " OR x.corpus_id <> z.corpus_id OR x.service_id <> z.service_id"
    ),
    "a task row's arrays disagree": (
        "SELECT count(*) FROM corpora_taskmessages x WHERE cardinality(x.classes) <> cardinality(x.counts)"
        " OR cardinality(x.rollups) <> cardinality(x.rollup_counts)"
        " OR cardinality(x.sequence) <> cardinality(x.details)"
        " OR (SELECT sum(n) FROM unnest(x.counts) n) <> cardinality(x.sequence)"
        " OR EXISTS (SELECT FROM unnest(x.sequence) i WHERE i < 1 OR i > cardinality(x.classes))"
    ),
    "(task, class) rows are not the task rows' classes": (
        "SELECT count(*) FROM ("
        "(SELECT x.task_id, x.corpus_id, x.service_id, x.task_status, u.class_id"
        " FROM corpora_taskmessages x, unnest(x.classes) u(class_id)"
        " EXCEPT ALL SELECT task_id, corpus_id, service_id, task_status, message_class_id FROM corpora_taskclass)"
        " UNION ALL "
        "(SELECT task_id, corpus_id, service_id, task_status, message_class_id FROM corpora_taskclass"
        " EXCEPT ALL SELECT x.task_id, x.corpus_id, x.service_id, x.task_status, u.class_id"
        " FROM corpora_taskmessages x, unnest(x.classes) u(class_id))) d"
    ),
    "a (task, class) row's document is not its task's": (
        "SELECT count(*) FROM corpora_taskclass p LEFT JOIN corpora_task t ON t.id = p.task_id"
        " WHERE t.document_id IS DISTINCT FROM p.document_id"
    ),
    "tallies are not a recount of the task rows": (
        f"SELECT count(*) FROM ({_RECOUNT}) r FULL JOIN (SELECT * FROM corpora_messagetally WHERE tasks <> 0) t"  # noqa: S608
        " ON (r.corpus_id, r.service_id, r.task_status, r.class_id)"
        " = (t.corpus_id, t.service_id, t.task_status, t.message_class_id)"
        " WHERE r.tasks IS DISTINCT FROM t.tasks OR r.messages IS DISTINCT FROM t.messages"
    ),
    "a tally is negative": "SELECT count(*) FROM corpora_messagetally WHERE tasks < 0 OR messages < 0",
    "a task row's package usages are not its package rows": (
        "SELECT count(*) FROM ("
        "(SELECT x.task_id, u.kind, u.package, u.flags FROM corpora_taskmessages x, unnest(x.packages) p(id)"
        " JOIN corpora_packageusage u ON u.id = p.id"
        " EXCEPT ALL SELECT task_id, kind, package, flags FROM corpora_taskpackage)"
        " UNION ALL "
        "(SELECT task_id, kind, package, flags FROM corpora_taskpackage"
        " EXCEPT ALL SELECT x.task_id, u.kind, u.package, u.flags FROM corpora_taskmessages x,"
        " unnest(x.packages) p(id) JOIN corpora_packageusage u ON u.id = p.id)) d"
    ),
    "package tallies are not a recount of the package rows": (
        "SELECT count(*) FROM (SELECT k.corpus_id, k.service_id, k.task_status, u.id, count(*) AS tasks"
        " FROM corpora_taskpackage k JOIN corpora_packageusage u"
        " ON (u.kind, u.package, u.flags) = (k.kind, k.package, k.flags)"
        " GROUP BY 1, 2, 3, 4) r"
        " FULL JOIN (SELECT * FROM corpora_packagetally WHERE tasks <> 0) t"
        " ON (r.corpus_id, r.service_id, r.task_status, r.id)"
        " = (t.corpus_id, t.service_id, t.task_status, t.package_usage_id)"
        " WHERE r.tasks IS DISTINCT FROM t.tasks"
    ),
    "a package tally is negative": "SELECT count(*) FROM corpora_packagetally WHERE tasks < 0",
    "a package row has no task row, or not its pair, status or document": (
        "SELECT count(*) FROM corpora_taskpackage k LEFT JOIN corpora_taskmessages x ON x.task_id = k.task_id"
        " LEFT JOIN corpora_task t ON t.id = k.task_id WHERE x.task_id IS NULL OR x.corpus_id <> k.corpus_id"
        " OR x.service_id <> k.service_id OR x.task_status <> k.task_status OR t.document_id <> k.document_id"
    ),
}


def message_tables_problems() -> list[str]:
    """The checks that fail, each with how many rows break it; empty when the tables agree."""
    problems = []
    with connection.cursor() as cursor:
        for name, sql in CHECKS.items():
            cursor.execute(sql)
            broken = cursor.fetchone()[0]
            if broken:
                problems.append(f"{name}: {broken}")
    return problems
