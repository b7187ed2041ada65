"""The reports API: overview, drill-down through the grain rollup, entries, documents, runtimes,
rerun and refresh. Data arrives the way it does in production: through result ingestion."""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import quote

import pytest
from django.db import connection, transaction
from rest_framework.test import APIClient

from conversion.taxonomy import meaning_of
from corpora.models import GrainSlice, LogMessage, ReportGrain, Task
from corpora.tasks.reports import messages_purge_scheduled
from dispatcher.ingest import RawResult, result_ingest
from jobs.models import Job
from jobs.runner import job_run
from tests.corpora.helpers import activated, imported
from tests.dispatcher.harness import result_zip
from tests.reports.messages import message_tables_problems, messages_add

pytestmark = pytest.mark.django_db

LOGS = {
    "warning": "Warning:expected:label Missing label\nWarning:expected:label Again\nStatus:conversion:1\n"
    "Info:runtime_ms:150\n",
    "error": "Warning:expected:label Missing\nError:undefined:\\foo The token \\foo\nError:I/O:b/c?d#e%z unreadable\n"
    "Status:conversion:2\nInfo:runtime_ms:2600\n",
    "error2": "Error:undefined:\\foo once\nError:undefined:\\bar twice\nStatus:conversion:2\nInfo:runtime_ms:40\n",
    "fatal": "Fatal:too_many_errors:100 Too many errors\nStatus:conversion:3\nInfo:runtime_ms:70000\n",
    "clean": "(Loading /x/article.cls.ltxml...\nStatus:conversion:0\nInfo:runtime_ms:90\n",
    "bare": "Status:conversion:0\nInfo:runtime_ms:95\n",
}


def _convert(tasks: list[Task], logs: list[str], tmp_path: Path) -> None:
    """Lease the tasks and feed one result each through the real ingestion."""
    Task.objects.filter(pk__in=[t.pk for t in tasks]).update(status=77)
    batch = [RawResult("w", "tex_to_html", str(t.pk), result_zip(log)) for t, log in zip(tasks, logs, strict=True)]
    result_ingest(batch, service_ids={"tex_to_html": tasks[0].service_id}, results_dir=tmp_path, max_bytes=10**7)


@pytest.fixture
def converted(corpus_root, tmp_path, settings):
    settings.RESULTS_DIR = tmp_path / "results"
    imported(corpus_root, "c", documents=8)
    activated("c")
    tasks = list(Task.objects.filter(service__name="tex_to_html").order_by("pk"))
    kinds = ["warning", "error", "error", "error2", "fatal", "clean", "bare"]
    _convert(tasks[:7], [LOGS[k] for k in kinds], settings.RESULTS_DIR)
    return tasks  # the eighth stays TODO


def test_the_overview_counts_and_percentages_leave_invalid_out(api, converted):
    Task.objects.filter(pk=converted[6].pk).update(status=-5)
    body = api.get("/api/reports/c/tex_to_html").json()
    assert body["total"] == 8
    counts = body["counts"]
    assert (counts["no_problem"], counts["warning"], counts["error"], counts["fatal"], counts["invalid"]) == (
        1,
        1,
        3,
        1,
        1,
    )
    assert counts["todo"] == 1 and body["percentages"]["error"] == round(300 / 7, 2)
    assert "invalid" not in body["percentages"]
    assert round(sum(body["percentages"].values()), 1) == 100.0


def test_category_rows_sum_to_the_slice_and_agree_with_what_rows_and_entries(api, converted):
    report = api.get("/api/reports/c/tex_to_html/error").json()
    assert report["computing"] is False and report["tasks"] == 3
    rows = {row["name"]: row for row in report["rows"]}
    assert rows["undefined"]["tasks"] == 3 and rows["undefined"]["messages"] == 4
    assert rows["I/O"]["tasks"] == 2 and rows["I/O"]["messages"] == 2
    assert [row["name"] for row in report["rows"]] == ["undefined", "I/O"]  # by task count
    assert report["messages"] == sum(row["messages"] for row in report["rows"])
    whats = api.get("/api/reports/c/tex_to_html/error/undefined").json()
    assert {row["name"]: row["tasks"] for row in whats["rows"]} == {"\\foo": 3, "\\bar": 1}
    assert sum(row["messages"] for row in whats["rows"]) == rows["undefined"]["messages"]
    entries = api.get(f"/api/reports/c/tex_to_html/error/undefined/{quote(chr(92) + 'foo')}").json()["entries"]
    assert len(entries) == 3 and {e["status"] for e in entries} == {"error"}
    for entry in entries:
        doc = api.get(f"/api/corpus/c/tex_to_html/document/{quote(entry['document'])}").json()
        assert ("error", "undefined", "\\foo") in {(m["severity"], m["category"], m["what"]) for m in doc["messages"]}


def test_the_warning_slice_counts_only_tasks_whose_status_is_warning(api, converted):
    report = api.get("/api/reports/c/tex_to_html/warning").json()
    # Error tasks also carry warnings, but the warning page is about warning tasks.
    meaning = meaning_of("warning", "expected")
    assert report["tasks"] == 1 and report["rows"] == [
        {"name": "expected", "tasks": 1, "messages": 2, "task_percent": 100.0, "message_percent": 100.0,
         "meaning": meaning.meaning, "what_names": meaning.what}
    ]  # fmt: skip


def test_names_with_slashes_and_reserved_characters_round_trip(api, converted):
    whats = api.get("/api/reports/c/tex_to_html/error/I/O").json()
    assert whats["category"] == "I/O" and [r["name"] for r in whats["rows"]] == ["b/c?d#e%z"]
    entries = api.get("/api/reports/c/tex_to_html/error/I/O/" + quote("b/c?d#e%z")).json()
    assert entries["what"] == "b/c?d#e%z" and len(entries["entries"]) == 2


def test_severities_without_messages_answer_empty_reports(api, converted):
    fatal_free = api.get("/api/reports/c/tex_to_html/invalid").json()
    assert fatal_free["rows"] == [] and fatal_free["tasks"] == 0 and fatal_free["tasks_without_messages"] == 0
    clean = api.get("/api/reports/c/tex_to_html/no_problem").json()
    assert clean["tasks"] == 2 and clean["rows"][0]["name"] == "loaded_file"
    assert clean["tasks_without_messages"] == 1  # one clean task logged nothing but the status


def test_unknown_severity_is_400_and_unknown_names_404(api, converted):
    assert api.get("/api/reports/c/tex_to_html/bogus").status_code == 400
    assert api.get("/api/reports/c/nope").status_code == 404
    assert api.get("/api/reports/nope/tex_to_html/error").status_code == 404
    assert api.get("/api/reports/c/tex_to_html/error/no_such_category").status_code == 404
    assert api.get("/api/corpus/c/tex_to_html/document/nope").status_code == 404


def test_pagination_edges(api, converted, settings):
    base = "/api/reports/c/tex_to_html/error/undefined/%5Cfoo"
    first = api.get(base, {"offset": 0, "page_size": 2}).json()["entries"]
    last = api.get(base, {"offset": 2, "page_size": 2}).json()["entries"]
    assert len(first) == 2 and len(last) == 1 and not {e["document"] for e in first} & {e["document"] for e in last}
    assert api.get(base, {"offset": 3}).json()["entries"] == []
    settings.MAX_REPORT_OFFSET = 3
    assert api.get(base, {"offset": 3}).status_code == 200  # at the cap
    response = api.get(base, {"offset": 4})  # beyond it
    assert response.status_code == 400 and "offset" in response.json()["errors"]
    settings.MAX_REPORT_PAGE_SIZE = 2
    assert api.get(base, {"page_size": 500}).json()["page_size"] == 2
    assert api.get(base, {"page_size": 0}).status_code == 400
    categories = api.get("/api/reports/c/tex_to_html/error", {"offset": 1, "page_size": 1}).json()
    assert categories["count"] == 2 and [r["name"] for r in categories["rows"]] == ["I/O"]


def test_the_document_report_links_its_stored_result(api, converted):
    from corpora.models import Document

    Document.objects.filter(pk=converted[1].document_id).update(name="x y%z")
    doc = api.get("/api/corpus/c/tex_to_html/document/" + quote("x y%z", safe="")).json()
    assert doc["document"] == "x y%z" and doc["status"] == "error" and doc["runtime_ms"] == 2600
    assert [m["what"] for m in doc["messages"]] == ["label", "\\foo", "b/c?d#e%z"]
    assert doc["result_url"].endswith("/document/x%20y%25z/result.zip")
    todo = api.get(f"/api/corpus/c/tex_to_html/document/{converted[7].document.name}").json()
    assert todo["status"] == "todo" and todo["result_url"] is None and todo["messages"] == []


def test_the_runtime_report_has_distribution_histogram_and_slowest(authed, converted):
    body = authed.get("/api/services/tex_to_html/runtimes", {"page_size": 2}).json()
    assert body["count"] == 7 and body["max_ms"] == 70000 and body["p50_ms"] == 150
    assert sum(bucket["count"] for bucket in body["histogram"]) == 7
    buckets = {bucket["lt_ms"]: bucket["count"] for bucket in body["histogram"]}
    # 40, 90 and 95 ms below 100; 150 below 250; 2600 twice below 5000; 70000 below 120000
    assert (buckets[100], buckets[250], buckets[5000], buckets[120000]) == (3, 1, 2, 1)
    assert [s["runtime_ms"] for s in body["slowest"]] == [70000, 2600]
    # The percentiles are read by rank from the index; they equal PostgreSQL's own percentile_disc.
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT percentile_disc(ARRAY[0.5, 0.9, 0.99]) WITHIN GROUP (ORDER BY runtime_ms),"
            " round(avg(runtime_ms), 1) FROM corpora_taskruntime"
        )
        expected, mean = cursor.fetchone()
    assert [body["p50_ms"], body["p90_ms"], body["p99_ms"]] == expected == [150, 70000, 70000]
    assert body["mean_ms"] == float(mean)
    assert authed.get("/api/services/tex_to_html/runtimes", {"offset": 6}).json()["slowest"][0]["runtime_ms"] == 40
    assert APIClient().get("/api/services/tex_to_html/runtimes").status_code == 401


def test_a_rerun_of_a_what_class_resets_exactly_those_tasks_and_new_results_change_the_grains(
    authed, converted, tmp_path
):
    before = authed.get("/api/reports/c/tex_to_html/error").json()
    assert GrainSlice.objects.filter(severity="error").exists()
    ack = authed.post("/api/reports/c/tex_to_html/rerun?severity=error&category=undefined&what=%5Cbar").json()
    assert ack["tasks"] == 1 and ack["run_id"]
    rerun_task = Task.objects.get(pk=converted[3].pk)
    assert rerun_task.status == 0 and not rerun_task.logmessage_set.exists()
    # Its runtime is gone from the runtime report's counts too (kept by triggers on the runtimes).
    assert authed.get("/api/services/tex_to_html/runtimes").json()["count"] == 6
    assert not GrainSlice.objects.exists() and not ReportGrain.objects.exists()
    _convert([rerun_task], [LOGS["clean"]], tmp_path)
    after = authed.get("/api/reports/c/tex_to_html/error").json()
    assert before["tasks"] == 3 and after["tasks"] == 2
    assert {r["name"]: r["tasks"] for r in after["rows"]}["undefined"] == 2


def test_rerun_checks_its_scope(authed, converted):
    assert authed.post("/api/reports/c/tex_to_html/rerun?severity=bogus").status_code == 400
    assert authed.post("/api/reports/c/tex_to_html/rerun?category=undefined").status_code == 400
    assert authed.post("/api/reports/nope/tex_to_html/rerun").status_code == 404
    assert APIClient().post("/api/reports/c/tex_to_html/rerun").status_code == 401
    everything = authed.post("/api/reports/c/tex_to_html/rerun").json()
    assert everything["tasks"] == 7 and set(
        Task.objects.filter(service__name="tex_to_html").values_list("status", flat=True)
    ) == {0}


def test_the_rerun_probes_each_tables_task_index_instead_of_hashing_the_scope(authed, converted):
    """On 10M messages a hash join with the scope scanned the whole message table (bench/README.md): the
    rerun's statements are planned, with the rerun's own settings, as a loop over the scope's tasks that
    probes each table's task index. On these few rows a scan of a whole table inside the loop can cost
    less than the probe, as it never does on real ones, so the EXPLAIN alone is planned without
    sequential scans: which index each statement can probe is what the test asks."""
    plans: dict[str, str] = {}

    def explaining(execute, sql, params, many, context):
        words = sql.split()
        if words[0] in ("DELETE", "UPDATE", "WITH") and ("rerun_scope" in sql or "purge_batch" in sql):
            cursor = context["cursor"]
            cursor.execute("SET LOCAL enable_seqscan = off")
            cursor.execute("EXPLAIN " + sql, params)
            plans[" ".join(words[:3])] = "\n".join(row[0] for row in cursor.fetchall())
            cursor.execute("SET LOCAL enable_seqscan = on")
        return execute(sql, params, many, context)

    with connection.execute_wrapper(explaining):
        assert authed.post("/api/reports/c/tex_to_html/rerun?severity=error").json()["tasks"] == 3
    assert set(plans) == {"WITH retired AS", "DELETE FROM corpora_taskruntime", "UPDATE corpora_task t"}
    for statement, plan in plans.items():
        assert "Nested Loop" in plan and "Hash" not in plan and "Merge" not in plan, (statement, plan)
    # The task rows whose messages it retires are found by their key.
    assert "corpora_taskmessages_pkey" in plans["WITH retired AS"], plans["WITH retired AS"]
    # The purge then deletes a batch's task rows by their key (keeping their package usages for the package
    # tallies), and their (task, class) and package rows by their task indexes.
    plans.clear()
    with connection.execute_wrapper(explaining):
        _purge()
    assert set(plans) == {
        "WITH gone AS",
        "DELETE FROM corpora_taskclass",
        "DELETE FROM corpora_taskpackage",
        "DELETE FROM corpora_stalemessages",
    }
    for statement, plan in plans.items():
        assert "Nested Loop" in plan and "Hash" not in plan and "Merge" not in plan, (statement, plan)
    assert "corpora_taskmessages_pkey" in plans["WITH gone AS"]
    assert "taskclass_task" in plans["DELETE FROM corpora_taskclass"]
    assert "taskpackage_task" in plans["DELETE FROM corpora_taskpackage"]


def test_the_message_tables_agree_with_each_other_and_the_tasks(converted):
    """Ingestion writes each task's row with its status, a (task, class) row per distinct class, and
    tallies equal to a recount of the task rows."""
    assert message_tables_problems() == []
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT x.task_status, count(*) FROM corpora_taskmessages x JOIN corpora_task t ON t.id = x.task_id"
            " WHERE t.status = x.task_status GROUP BY 1 ORDER BY 1 DESC"
        )
        assert cursor.fetchall() == [(-1, 1), (-2, 1), (-3, 3), (-4, 1)]  # "bare" logged no message
    # A task's messages in log order, as its log has them.
    assert list(
        LogMessage.objects.filter(task=converted[1]).order_by("position").values_list("severity", "category", "what")
    ) == [("warning", "expected", "label"), ("error", "undefined", "\\foo"), ("error", "I/O", "b/c?d#e%z")]


def _purge() -> None:
    """What beat and a worker do after a rerun: start the purge of retired messages, and run it."""
    job_id = messages_purge_scheduled()
    assert job_id is not None, "beat started no purge"
    job_run(job_id)


def _heap_fetches(corpus_id: int) -> tuple[int, int]:
    """Rows an index-only scan of a pair's (task, class) rows returns, as a snapshot's members statement
    reads them, and how many of them it had to fetch from the heap (pages not marked all-visible)."""
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute("SET LOCAL enable_bitmapscan = off")
        cursor.execute(
            "EXPLAIN (ANALYZE, FORMAT JSON) SELECT document_id FROM corpora_taskclass WHERE corpus_id = %s",
            [corpus_id],
        )
        plan = cursor.fetchone()[0][0]["Plan"]
    assert plan["Node Type"] == "Index Only Scan", plan
    return plan["Actual Rows"], plan["Heap Fetches"]


@pytest.mark.django_db(transaction=True)  # the purge's transactions commit, and VACUUM may run after them
def test_the_purge_vacuums_the_message_tables_so_the_report_index_is_read_alone(authed, converted):
    """After the purge a snapshot's members come from the report index without a visit to the heap: the
    purge ends with VACUUM, which autovacuum would put off until a fifth of the table is dead."""
    corpus_id = converted[0].corpus_id
    rows, fetched = _heap_fetches(corpus_id)
    assert rows and fetched == rows, "written and never vacuumed: every row is checked in the heap"
    assert authed.post("/api/reports/c/tex_to_html/rerun?severity=error").json()["tasks"] == 3
    _purge()
    assert Job.objects.get(kind="messages_purge").result == {"tasks": 3, "vacuumed": True}
    rows, fetched = _heap_fetches(corpus_id)
    assert rows and fetched == 0


def _wal_compression_server() -> tuple[str, bool]:
    """The server's own wal_compression setting, and whether it was built with lz4."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT setting, 'lz4' = ANY(enumvals) FROM pg_settings WHERE name = 'wal_compression'")
        return cursor.fetchone()


@pytest.mark.django_db(transaction=True)  # the rerun's own transaction ends, and its settings with it
def test_the_rerun_compresses_its_wal_where_the_server_lets_it(authed, converted):
    """The rerun's page images go into the WAL compressed with lz4 (a third of the bytes on 1M tasks,
    bench/README.md), for its own transaction only; on a server built without lz4 (the embedded one)
    it runs uncompressed."""
    server, has_lz4 = _wal_compression_server()
    assert server == "off", "this test expects the server's default: no WAL compression"
    seen: list[str] = []

    def watching(execute, sql, params, many, context):
        result = execute(sql, params, many, context)
        if sql.startswith(("UPDATE corpora_task t SET status", "WITH gone AS (DELETE FROM corpora_taskmessages x")):
            with context["connection"].cursor() as cursor:  # not the statement's: its row count is read
                cursor.execute("SHOW wal_compression")
                seen.append(cursor.fetchone()[0])
        return result

    with connection.execute_wrapper(watching):
        assert authed.post("/api/reports/c/tex_to_html/rerun?severity=error").json()["tasks"] == 3
        _purge()  # and the purge of the messages it retired
    assert seen == ["lz4" if has_lz4 else "off"] * 2
    with connection.cursor() as cursor:
        cursor.execute("SHOW wal_compression")
        assert cursor.fetchone()[0] == "off"


def test_a_role_that_may_not_set_wal_compression_reruns_uncompressed(authed, converted, caplog):
    from corpora.message_store import wal_compress

    role = f"ccs_test_plain_{os.getpid()}"  # roles are the server's, not the test database's
    with connection.cursor() as cursor:
        cursor.execute(f"CREATE ROLE {role} NOLOGIN")  # undone with the test's transaction
        cursor.execute(f"SET LOCAL ROLE {role}")
        assert wal_compress(cursor) is False
        cursor.execute("SHOW wal_compression")
        assert cursor.fetchone()[0] == "off"
        cursor.execute("RESET ROLE")
        cursor.execute(f"GRANT SET ON PARAMETER wal_compression TO {role}")
        cursor.execute(f"SET LOCAL ROLE {role}")
        has_lz4 = _wal_compression_server()[1]
        assert wal_compress(cursor) is has_lz4
        cursor.execute("SHOW wal_compression")
        assert cursor.fetchone()[0] == ("lz4" if has_lz4 else "off")
        cursor.execute("RESET ROLE")
        cursor.execute(f"REVOKE SET ON PARAMETER wal_compression FROM {role}")
    assert ("no SET privilege" if has_lz4 else "no lz4") in caplog.text


def test_the_pair_refresh_clears_grains_and_the_global_refresh_is_a_debounced_job(authed, converted):
    authed.get("/api/reports/c/tex_to_html/error")
    cleared = authed.post("/api/reports/c/tex_to_html/refresh")
    assert cleared.status_code == 200 and cleared.json()["cleared_slices"] == 1 and not ReportGrain.objects.exists()
    first = authed.post("/api/reports/refresh")
    second = authed.post("/api/reports/refresh")
    assert first.status_code == 202 and first.json()["created"] and not second.json()["created"]
    assert first.json()["job"]["uuid"] == second.json()["job"]["uuid"]


def test_the_global_refresh_job_rebuilds_every_slice(converted):
    from jobs.actions import job_enqueue
    from jobs.runner import job_run

    job, _ = job_enqueue(kind="reports_refresh", actor="t")
    assert job_run(job.pk) == "succeeded"
    from corpora.queries.reports import SEVERITIES

    assert GrainSlice.objects.filter(service__name="tex_to_html").count() == len(SEVERITIES)


@pytest.mark.django_db(transaction=True)
def test_a_slice_that_does_not_fit_the_budget_is_built_in_the_background(converted, settings):
    import psycopg

    from jobs.models import Job
    from tests.support import test_database_url

    settings.REPORT_BUILD_BUDGET_MS = 300
    with psycopg.connect(test_database_url()) as blocker:
        blocker.execute("LOCK TABLE corpora_reportgrain IN ACCESS EXCLUSIVE MODE")
        body = APIClient().get("/api/reports/c/tex_to_html/error").json()
        blocker.rollback()
    assert body["computing"] is True and body["rows"] == []
    job = Job.objects.get(kind="report_slice_build")
    assert job.params == {
        "corpus_id": converted[0].corpus_id,
        "service_id": converted[0].service_id,
        "severity": "error",
    }
    from jobs.runner import job_run

    job_run(job.pk)
    assert APIClient().get("/api/reports/c/tex_to_html/error").json()["computing"] is False


def test_messages_carry_their_tasks_status_through_ingestion_rerun_and_pause(authed, converted, tmp_path):
    """Reports of one status read the messages alone (their task_status, no join with the tasks); that
    is right only while every message's task_status is its task's status and no task outside the
    completed statuses has messages, through ingestion, rerun, new results and pause alike."""
    from django.db import connection
    from django.db.models import F

    def stray_messages() -> int:
        assert message_tables_problems() == []
        return (
            LogMessage.objects.filter(task__status__gte=0).count()
            + LogMessage.objects.filter(task__status__lt=-5).count()
            + LogMessage.objects.exclude(task_status=F("task__status")).count()
        )

    def info_tasks_joined() -> int:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT count(DISTINCT m.task_id) FROM corpora_logmessage m JOIN corpora_task t ON t.id = m.task_id"
                " WHERE m.severity = 'info' AND t.status BETWEEN -5 AND -1 AND t.service_id = %s",
                [converted[0].service_id],
            )
            return cursor.fetchone()[0]

    assert set(LogMessage.objects.values_list("task_status", flat=True)) == {-1, -2, -3, -4}
    info = authed.get("/api/reports/c/tex_to_html/info").json()
    assert info["messages"] >= 1 and stray_messages() == 0
    assert sum(r["tasks"] for r in info["rows"] if r["name"] == "loaded_file") == info_tasks_joined()
    authed.post("/api/reports/c/tex_to_html/rerun?severity=error&category=undefined&what=%5Cbar")
    _convert([Task.objects.get(pk=converted[3].pk)], [LOGS["warning"]], tmp_path)  # error before, warning now
    assert LogMessage.objects.filter(task=converted[3].pk).values_list("task_status", flat=True).distinct().get() == -2
    assert stray_messages() == 0
    authed.post("/api/reports/c/tex_to_html/rerun?severity=no_problem")
    assert stray_messages() == 0
    authed.post("/api/reports/c/tex_to_html/pause")
    assert stray_messages() == 0
    info_after = authed.get("/api/reports/c/tex_to_html/info").json()
    assert info_after["messages"] == 0 and info_tasks_joined() == 0  # the one info message was on a clean task


def test_an_entry_list_holds_only_the_tasks_of_its_status(api, converted):
    # expected:label is a warning on the warning task and on both "error" tasks; the warning page is about
    # warning tasks, so only the first is listed, and the slice says the same.
    entries = api.get("/api/reports/c/tex_to_html/warning/expected/label").json()["entries"]
    assert [(e["document"], e["status"]) for e in entries] == [(converted[0].document.name, "warning")]
    assert api.get("/api/reports/c/tex_to_html/warning/expected").json()["rows"][0]["tasks"] == 1


def test_the_info_entry_list_merges_every_status_in_task_order(api, corpus_root, tmp_path, settings):
    """An info message of tasks of four statuses: one list in task order, paged without gaps or repeats."""
    imported(corpus_root, "c", documents=8)
    activated("c")
    tasks = list(Task.objects.filter(service__name="tex_to_html").order_by("pk"))
    loading = "(Loading /x/article.cls.ltxml...\n"
    ends = ["Status:conversion:0\n", "Warning:w:x y\nStatus:conversion:1\n", "Error:e:x y\nStatus:conversion:2\n",
            "Fatal:f:x y\nStatus:conversion:3\n"]  # fmt: skip
    # Statuses interleaved over the task ids: 0 1 2 3 0 1 2 3; the last two tasks log no loaded file.
    logs = [loading + ends[i % 4] for i in range(6)] + [ends[0], ends[1]]
    _convert(tasks, logs, tmp_path)
    base = "/api/reports/c/tex_to_html/info/loaded_file/" + quote("/x/article.cls.ltxml")
    pages = [api.get(base, {"offset": offset, "page_size": 4}).json()["entries"] for offset in (0, 4, 8)]
    listed = [(e["document"], e["status"]) for page in pages for e in page]
    names = {t.pk: t.document.name for t in tasks}
    expected_statuses = ["no_problem", "warning", "error", "fatal"]
    assert listed == [(names[t.pk], expected_statuses[i % 4]) for i, t in enumerate(tasks[:6])]
    assert [len(page) for page in pages] == [4, 2, 0]


def test_every_slice_equals_its_definition_as_one_plain_rollup(api, corpus_root, tmp_path):
    """A slice adds per-status rollups; its rows must equal one GROUP BY ROLLUP over the messages joined
    with their tasks (tasks counted once however many messages they have), for every severity."""
    from corpora.grains import grain_slice_rebuild
    from corpora.queries.reports import SEVERITIES

    imported(corpus_root, "c", documents=8)
    activated("c")
    tasks = list(Task.objects.filter(service__name="tex_to_html").order_by("pk"))
    twice = "(Loading /x/a.cls.ltxml...\n(Loading /x/a.cls.ltxml...\n(Loading /x/b.sty.ltxml...\n"
    once = "(Loading /x/a.cls.ltxml...\n"
    ends = [
        "Status:conversion:0\n",
        "Warning:w:x y\nWarning:w:x again\nStatus:conversion:1\n",
        "Warning:w:x y\nError:e:x y\nStatus:conversion:2\n",
        "Error:e:x y\nFatal:f:x y\nStatus:conversion:3\n",
    ]
    _convert(tasks, [(twice if i % 3 else once) + ends[i % 4] for i in range(8)], tmp_path)
    pair = (tasks[0].corpus_id, tasks[0].service_id)
    for severity, (statuses, message_severity) in SEVERITIES.items():
        grain_slice_rebuild(*pair, severity)
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT m.category, m.what, count(DISTINCT m.task_id), count(*)"
                " FROM corpora_logmessage m JOIN corpora_task t ON t.id = m.task_id"
                " WHERE m.corpus_id = %s AND m.service_id = %s AND m.severity = %s AND t.status = ANY(%s)"
                " GROUP BY ROLLUP (m.category, m.what)",
                [*pair, message_severity, list(statuses)],
            )
            expected = set(cursor.fetchall())
        built = set(
            ReportGrain.objects.filter(severity=severity).values_list("category", "what", "task_count", "message_count")
        )
        assert built == expected, severity
    info_total = ReportGrain.objects.get(severity="info", category__isnull=True, what__isnull=True)
    assert (info_total.task_count, info_total.message_count) == (8, 8 + 2 * 5)  # 3 of 8 logged `once`


def test_a_get_on_a_pair_action_path_is_a_documented_405_problem(authed):
    """/api/reports/{c}/{s}/pause (resume, rerun, refresh) is the pair's POST action, not a severity page."""
    for action in ("pause", "resume", "rerun", "refresh"):
        response = authed.get(f"/api/reports/a/tex_to_html/{action}")
        assert response.status_code == 405 and response["Content-Type"] == "application/problem+json"
    document = authed.get("/api/openapi.json").json()
    assert "405" in document["paths"]["/api/reports/{corpus}/{service}/{severity}"]["get"]["responses"]


def test_the_writer_keeps_any_text_exactly(converted):
    """Details and names go into COPY as array literals made by the writer: quotes, backslashes, braces,
    commas, tabs, newlines, NULL spelled out and non-ASCII come back exactly, in log order."""
    tricky = ['"quoted"', "back\\slash\\", "{braces}, commas", "tab\there\nnew line\r", "NULL", "é ∑ \U0001d538"]
    tricky += ["", " "]
    task = converted[7]
    Task.objects.filter(pk=task.pk).update(status=-2)
    messages_add(task, *[("warning", f"c{i % 2}\\", text or "w", text) for i, text in enumerate(tricky)])
    stored = list(LogMessage.objects.filter(task=task).order_by("position").values_list("category", "what", "details"))
    assert stored == [(f"c{i % 2}\\", text or "w", text) for i, text in enumerate(tricky)]
    assert message_tables_problems() == []


def test_a_rerun_retires_messages_at_once_and_the_purge_or_the_next_result_deletes_their_rows(
    authed, converted, tmp_path
):
    """A rerun takes its tasks' messages out of every report, entry list, document and sandbox in its
    transaction and leaves their rows to the purge; a task's next result before the purge replaces
    them, and a second rerun of a retired task takes nothing off the tallies twice."""
    from corpora.models import StaleMessages, TaskClass, TaskMessages

    foo = "/api/reports/c/tex_to_html/error/undefined/%5Cfoo"
    retired = converted[3]  # error2: \foo and \bar
    assert retired.document.name in {e["document"] for e in authed.get(foo).json()["entries"]}
    authed.post("/api/reports/c/tex_to_html/rerun?severity=error&category=undefined&what=%5Cbar")
    # Its rows are still there, retired ...
    assert StaleMessages.objects.filter(task_id=retired.pk).exists()
    assert TaskMessages.objects.filter(task_id=retired.pk).exists()
    assert TaskClass.objects.filter(task_id=retired.pk, task_status=-3).count() == 2
    assert message_tables_problems() == []
    # ... and shown nowhere: not in the entry list of a class it still has rows for, not in its document,
    # not in the counts, not in a sandbox carved from the class.
    assert retired.document.name not in {e["document"] for e in authed.get(foo).json()["entries"]}
    assert len(authed.get(foo).json()["entries"]) == 2
    document = authed.get(f"/api/corpus/c/tex_to_html/document/{retired.document.name}").json()
    assert document["status"] == "todo" and document["messages"] == []
    rows = {r["name"]: r for r in authed.get("/api/reports/c/tex_to_html/error/undefined").json()["rows"]}
    assert rows["\\foo"]["tasks"] == 2 and "\\bar" not in rows
    carve = authed.post(
        "/api/corpora/c/sandbox",
        {"name": "sb", "service": "tex_to_html", "severity": "error", "category": "undefined", "per_class_limit": 9},
        format="json",
    )
    job_run(carve.json()["uuid"])
    from corpora.models import Document

    assert retired.document.name not in set(Document.objects.filter(corpus__name="sb").values_list("name", flat=True))
    # A second rerun that takes the retired task again takes nothing off twice.
    authed.post("/api/reports/c/tex_to_html/rerun?severity=error")
    assert message_tables_problems() == []
    # The next result of a retired task, before the purge, replaces its rows.
    _convert([retired], [LOGS["warning"]], tmp_path)
    assert not StaleMessages.objects.filter(task_id=retired.pk).exists()
    assert set(TaskClass.objects.filter(task_id=retired.pk).values_list("task_status", flat=True)) == {-2}
    assert message_tables_problems() == []
    # The purge deletes the rest; the reports are as they were after the rerun.
    left = StaleMessages.objects.count()
    assert left == 2
    assert not Job.objects.filter(kind="messages_purge").exists()  # the reruns started none: beat does
    _purge()
    # In this test's transaction the purge's deletions are not yet committed: it leaves VACUUM to autovacuum.
    assert not StaleMessages.objects.exists()
    assert Job.objects.get(kind="messages_purge").result == {"tasks": left, "vacuumed": False}
    assert messages_purge_scheduled() is None  # nothing left: beat starts no purge
    assert TaskMessages.objects.filter(task_id__in=[t.pk for t in converted[1:3]]).count() == 0
    assert message_tables_problems() == []
