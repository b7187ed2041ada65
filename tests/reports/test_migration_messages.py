"""Migration 0010 converts a populated message table (a row per message) into task rows, (task, class)
rows and tallies in place, and back. Every report read after it equals the report its definition gives
on the old table: category and what rows with their task and message counts for every severity, every
entry list with its details, and every document's messages in log order."""

from __future__ import annotations

from urllib.parse import quote

import pytest
from django.db import connection
from rest_framework.test import APIClient

from corpora.models import Task
from corpora.statuses import SEVERITIES
from dispatcher.ingest import RawResult, result_ingest
from tests.corpora.helpers import activated, imported
from tests.dispatcher.harness import result_zip
from tests.reports.messages import message_tables_problems
from tests.support import migrate

OLD = [("reports", "0009_logmessage_partitioned_by_status")]
LOGS = [
    "(Loading /x/article.cls.ltxml...\nWarning:expected:label Missing\nError:undefined:\\foo The token\n"
    "\tat doc.tex; line 3\nError:undefined:\\foo again\nError:I/O:b/c?d#e unreadable\nStatus:conversion:2\n",
    "Warning:expected:label Missing label\nWarning:expected:label Again\nStatus:conversion:1\n",
    "Error:undefined:\\bar twice\nError:undefined:\\foo once\nStatus:conversion:2\nInfo:runtime_ms:40\n",
    "Fatal:too_many_errors:100 Too many errors\nStatus:conversion:3\n",
    "(Loading /x/article.cls.ltxml...\n(Loading /x/b.sty.ltxml...\nStatus:conversion:0\n",
    "Status:conversion:0\n",
]


def _old_reports(corpus_id: int, service_id: int) -> dict:
    """The reports as their definitions give them on the old table (a row per message, in id order)."""
    reports: dict = {"grains": {}, "entries": {}, "documents": {}}
    with connection.cursor() as cursor:
        for severity, (statuses, message_severity) in SEVERITIES.items():
            cursor.execute(
                "SELECT m.category, m.what, count(DISTINCT m.task_id), count(*)"
                " FROM reports_logmessage m JOIN corpora_task t ON t.id = m.task_id"
                " WHERE m.corpus_id = %s AND m.service_id = %s AND m.severity = %s AND t.status = ANY(%s)"
                " GROUP BY ROLLUP (m.category, m.what)",
                [corpus_id, service_id, message_severity, list(statuses)],
            )
            reports["grains"][severity] = sorted(cursor.fetchall(), key=repr)
            cursor.execute(
                "SELECT m.category, m.what, d.name, (SELECT x.details FROM reports_logmessage x"
                " WHERE x.task_id = t.id AND x.severity = m.severity AND x.category = m.category AND x.what = m.what"
                " ORDER BY x.id LIMIT 1)"
                " FROM (SELECT DISTINCT task_id, severity, category, what FROM reports_logmessage"
                " WHERE corpus_id = %s AND service_id = %s AND severity = %s) m"
                " JOIN corpora_task t ON t.id = m.task_id JOIN corpora_document d ON d.id = t.document_id"
                " WHERE t.status = ANY(%s) ORDER BY m.category, m.what, t.id",
                [corpus_id, service_id, message_severity, list(statuses)],
            )
            for category, what, name, details in cursor.fetchall():
                reports["entries"].setdefault((severity, category, what), []).append((name, details[:300]))
        cursor.execute(
            "SELECT d.name, m.severity, m.category, m.what, m.details FROM reports_logmessage m"
            " JOIN corpora_task t ON t.id = m.task_id JOIN corpora_document d ON d.id = t.document_id"
            " WHERE m.corpus_id = %s AND m.service_id = %s ORDER BY m.id",
            [corpus_id, service_id],
        )
        for name, *message in cursor.fetchall():
            reports["documents"].setdefault(name, []).append(tuple(message))
    return reports


def _new_reports(api: APIClient, names: list[str]) -> dict:
    """The same reports read through the API after the migration."""
    reports: dict = {"grains": {}, "entries": {}, "documents": {}}
    base = "/api/reports/c/tex_to_html"
    for severity in SEVERITIES:
        categories = api.get(f"{base}/{severity}", {"page_size": 1000}).json()
        grains = {(None, None, categories["tasks"] - categories["tasks_without_messages"], categories["messages"])}
        for row in categories["rows"]:
            grains.add((row["name"], None, row["tasks"], row["messages"]))
            whats = api.get(f"{base}/{severity}/{quote(row['name'], safe='')}", {"page_size": 1000}).json()
            for what in whats["rows"]:
                grains.add((row["name"], what["name"], what["tasks"], what["messages"]))
                path = f"{base}/{severity}/{quote(row['name'], safe='')}/{quote(what['name'], safe='')}"
                entries = api.get(path, {"page_size": 1000}).json()["entries"]
                reports["entries"][(severity, row["name"], what["name"])] = [
                    (entry["document"], entry["details"]) for entry in entries
                ]
        reports["grains"][severity] = sorted(grains, key=repr)
    for name in names:
        messages = api.get(f"/api/corpus/c/tex_to_html/document/{name}").json()["messages"]
        if messages:
            reports["documents"][name] = [(m["severity"], m["category"], m["what"], m["details"]) for m in messages]
    return reports


def _converted(corpus_root, tmp_path) -> list[Task]:
    """Corpus c with tex_to_html: the first six tasks' results (LOGS) ingested, the last two TODO."""
    imported(corpus_root, "c", documents=8)
    activated("c")
    tasks = list(Task.objects.filter(service__name="tex_to_html").order_by("pk"))
    Task.objects.filter(pk__in=[t.pk for t in tasks[:6]]).update(status=77)
    batch = [RawResult("w", "tex_to_html", str(t.pk), result_zip(log)) for t, log in zip(tasks, LOGS, strict=False)]
    result_ingest(batch, service_ids={"tex_to_html": tasks[0].service_id}, results_dir=tmp_path, max_bytes=10**7)
    return tasks


@pytest.mark.django_db(transaction=True)
def test_a_populated_database_migrates_in_place_and_every_report_stays_the_same(corpus_root, tmp_path):
    tasks = _converted(corpus_root, tmp_path)
    corpus_id, service_id = tasks[0].corpus_id, tasks[0].service_id
    names = [task.document.name for task in tasks]
    migrate(OLD)  # the reverse: the old table, filled from the task rows
    try:
        with connection.cursor() as cursor:
            # Rows the old table could hold that no log of the fixture writes: a what holding '/', an
            # empty what, the same class again after others, long details, a task of many messages.
            cursor.execute("UPDATE corpora_task SET status = -3 WHERE id = %s", [tasks[6].pk])
            rows = [("error", "I/O", "a/b c", "x" * 400), ("error", "I/O", "", ""), ("warning", "w", "x", "one")]
            rows += [("info", "loaded_file", f"p{i % 7}.sty", "") for i in range(300)]
            rows += [("error", "I/O", "a/b c", "again\nsecond line")]
            cursor.executemany(
                "INSERT INTO reports_logmessage (task_id, corpus_id, service_id, task_status, severity, category,"
                " what, details) VALUES (%s, %s, %s, -3, %s, %s, %s, %s)",
                [(tasks[6].pk, corpus_id, service_id, *row) for row in rows],
            )
            cursor.execute("SELECT count(*) FROM reports_logmessage")
            old_count = cursor.fetchone()[0]
        before = _old_reports(corpus_id, service_id)
    finally:
        migrate()
    assert old_count > len(rows) + 10
    assert message_tables_problems() == []
    after = _new_reports(APIClient(), names)
    assert after["grains"] == before["grains"]
    assert after["entries"] == before["entries"]
    assert after["documents"] == before["documents"]
    assert sum(len(messages) for messages in after["documents"].values()) == old_count
    # The migrated rows work for writes too: a rerun of one what-class takes exactly its tasks.
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM corpora_logmessage WHERE what = 'a/b c'")
        assert cursor.fetchone()[0] == 2
    from corpora.actions.reports import rerun

    assert rerun(corpus_name="c", service_name="tex_to_html", actor="t", severity="error", category="I/O",
                 what="a/b c")["tasks"] == 1  # fmt: skip
    assert message_tables_problems() == []


@pytest.mark.django_db(transaction=True)
def test_migrating_back_before_retired_messages_deletes_their_rows_first(corpus_root, tmp_path):
    """Without the list of retired tasks the view would show a rerun's retired messages again and the
    tallies would disagree with the rows: the reverse of reports migration 0012 deletes those rows."""
    from corpora.actions.reports import rerun

    _converted(corpus_root, tmp_path)
    assert rerun(corpus_name="c", service_name="tex_to_html", actor="tester", severity="error")["tasks"] > 0
    with connection.cursor() as cursor:
        cursor.execute("SELECT array_agg(task_id ORDER BY task_id) FROM corpora_stalemessages")
        retired = cursor.fetchone()[0]
    assert retired and message_tables_problems() == []
    migrate([("reports", "0011_runtime_bins")])
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT count(*) FROM reports_taskmessages WHERE task_id = ANY(%s)", [retired])
            assert cursor.fetchone()[0] == 0
            cursor.execute("SELECT count(*) FROM reports_taskclass WHERE task_id = ANY(%s)", [retired])
            assert cursor.fetchone()[0] == 0
            cursor.execute("SELECT count(*) FROM reports_logmessage WHERE task_id = ANY(%s)", [retired])
            assert cursor.fetchone()[0] == 0
    finally:
        migrate()
    assert message_tables_problems() == []
