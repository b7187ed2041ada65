"""Messages as data: GET /api/reports/{corpus}/{service}/messages streams every message of a slice as CSV,
JSON lines or Parquet. The rows are held against the document reports of every document of a corpus whose
messages went in through the message writer, before and after a rerun retired some."""

from __future__ import annotations

import csv
import io
import json
import threading
from typing import Any

import pyarrow.parquet as pq
import pytest
from django.db import connection
from rest_framework.test import APIClient, APIRequestFactory

from corpora.actions.reports import rerun
from corpora.models import Task
from corpora.queries.corpora import pair_resolve
from corpora.queries.reports import EXPORT_COLUMNS, _read_ahead, export_rows, messages_export, retired_messages_left
from corpora.statuses import SEVERITIES
from reports.api import MessagesExportApi
from reports.links import messages_export_url
from reports.serializers import CsvLines, export_chunks
from tests.corpora.helpers import activated, imported
from tests.reports.messages import messages_add

pytestmark = pytest.mark.django_db

SERVICE = "tex_to_html"
FORMATS = ("csv", "jsonl", "parquet")
# Per document: its status and its messages (severity, category, what, details) in log order. The texts
# hold everything a format must carry: commas, quotes, line breaks of both kinds, tabs, non-ASCII, '/'.
DOCUMENTS: list[tuple[int, list[tuple[str, str, str, str]]]] = [
    (-1, [("info", "loaded_file", "article.cls", ""), ("info", "summary", "pass", 'a "quoted", text')]),
    (
        -2,
        [
            ("info", "loaded_file", "article.cls", "line 1"),
            ("warning", "expected", "label", "Missing label, twice\nsecond line\r\nthird"),
            ("warning", "expected", "label", "again"),
            ("warning", "missing_file", "a,b.sty", "é — ∑ \u2028 done"),
        ],
    ),
    (
        -3,
        [
            ("warning", "expected", "label", "w"),
            ("error", "undefined", "\\foo", "The token \\foo is not defined.\n\tat doc.tex; line 3"),
            ("error", "I/O", "b/c?d#e%z", "unreadable"),
            ("error", "undefined", "\\foo", ""),
            ("info", "loaded_file", "article.cls", "late info"),
        ],
    ),
    (-3, [("error", "undefined", "\\bar", "bar"), ("error", "undefined", "\\foo", "foo again")]),
    (-4, [("warning", "expected", "label", "x"), ("fatal", "too_many_errors", "100", "Too many errors")]),
    (-5, [("fatal", "invalid", "no_tex", "no TeX file")]),
]


@pytest.fixture
def written(corpus_root) -> list[Task]:
    """Corpus c on tex_to_html: one document per entry of DOCUMENTS with that status and those messages,
    written by the message writer; a last document stays TODO with none."""
    imported(corpus_root, "c", documents=len(DOCUMENTS) + 1)
    activated("c")
    tasks = list(Task.objects.filter(corpus__name="c", service__name=SERVICE).order_by("pk"))
    for task, (status, messages) in zip(tasks, DOCUMENTS, strict=False):
        Task.objects.filter(pk=task.pk).update(status=status)
        messages_add(task, *messages)
    return tasks


def _export(api: APIClient, query: str = "", *, expect: int = 200) -> Any:
    response = api.get(f"/api/reports/c/{SERVICE}/messages{query}")
    assert response.status_code == expect, getattr(response, "content", b"")[:500]
    return response


def rows_of(body: bytes, format_name: str) -> list[dict[str, str]]:
    """An export's rows parsed back from its format."""
    if format_name == "csv":
        lines = list(csv.reader(io.StringIO(body.decode(), newline="")))
        assert tuple(lines[0]) == EXPORT_COLUMNS
        return [dict(zip(EXPORT_COLUMNS, line, strict=True)) for line in lines[1:]]
    if format_name == "jsonl":
        return [json.loads(line) for line in body.split(b"\n") if line]
    table = pq.read_table(io.BytesIO(body))
    assert tuple(table.column_names) == EXPORT_COLUMNS
    return table.to_pylist()


def _rows(response: Any, format_name: str) -> list[dict[str, str]]:
    return rows_of(b"".join(response.streaming_content), format_name)


def _document_reports(api: APIClient, tasks: list[Task]) -> list[dict[str, str]]:
    """Every message of every document as the document report API gives it, as export rows in task order."""
    rows = []
    for task in tasks:
        report = api.get(f"/api/corpus/c/{SERVICE}/document/{task.document.name}").json()
        for message in report["messages"]:
            rows.append({"document": report["document"], "entry": report["entry"], "status": report["status"],
                         **{key: message[key] for key in ("severity", "category", "what", "details")}})  # fmt: skip
    return rows


@pytest.mark.parametrize("format_name", FORMATS)
def test_the_export_is_every_message_of_the_document_reports(api, written, format_name):
    expected = _document_reports(api, written)
    assert len(expected) == sum(len(messages) for _, messages in DOCUMENTS)
    assert _rows(_export(api, f"?format={format_name}"), format_name) == expected


@pytest.mark.parametrize("format_name", FORMATS)
def test_after_a_rerun_the_retired_messages_are_left_out_as_the_document_reports_leave_them(api, written, format_name):
    rerun(corpus_name="c", service_name=SERVICE, actor="tester", severity="error")
    assert retired_messages_left() == 2  # the two error tasks' rows are still there, retired
    expected = _document_reports(api, written)
    assert {row["status"] for row in expected} == {"no_problem", "warning", "fatal", "invalid"}
    assert _rows(_export(api, f"?format={format_name}"), format_name) == expected
    assert _rows(_export(api, f"?severity=error&format={format_name}"), format_name) == []


def _slice(rows: list[dict[str, str]], severity: str, category: str | None, what: str | None) -> list[dict[str, str]]:
    """The definition of a slice: the messages of the severity page's statuses and message severity."""
    statuses, message_severity = SEVERITIES[severity]
    names = {"no_problem": -1, "warning": -2, "error": -3, "fatal": -4, "invalid": -5}
    return [
        row for row in rows
        if names[row["status"]] in statuses and row["severity"] == message_severity
        and category in (None, row["category"]) and what in (None, row["what"])
    ]  # fmt: skip


def test_filters_narrow_the_slice_to_a_severity_a_category_and_a_what(api, written):
    every = _document_reports(api, written)
    cases = 0
    for severity in SEVERITIES:
        rows = _slice(every, severity, None, None)
        assert _rows(_export(api, f"?severity={severity}"), "csv") == rows
        for category in {row["category"] for row in rows}:
            narrowed = _slice(every, severity, category, None)
            url = messages_export_url("c", SERVICE, severity, category, format_name="jsonl")
            assert _rows(api.get(url), "jsonl") == narrowed
            for what in {row["what"] for row in narrowed}:
                url = messages_export_url("c", SERVICE, severity, category, what, format_name="parquet")
                assert _rows(api.get(url), "parquet") == _slice(every, severity, category, what)
                cases += 1
    assert cases >= 8
    # info takes every completed status; error only the error tasks, whose info messages it leaves out.
    assert {row["status"] for row in _rows(_export(api, "?severity=info"), "csv")} == {"no_problem", "warning", "error"}
    assert [row["details"] for row in _rows(_export(api, "?severity=error&category=I/O"), "csv")] == ["unreadable"]
    assert _rows(_export(api, "?severity=error&category=undefined&what=nothing"), "csv") == []
    assert _rows(_export(api, "?severity=&category=&what="), "csv") == every  # empty: not narrowed


def test_headers_name_the_format_and_a_file_per_slice(api, written):
    for format_name, media_type in (("csv", "text/csv"), ("jsonl", "application/x-ndjson"),
                                    ("parquet", "application/vnd.apache.parquet")):  # fmt: skip
        response = _export(api, f"?severity=error&category=I/O&format={format_name}")
        assert response.streaming and response["Content-Type"].split(";")[0] == media_type
        assert response["Content-Disposition"] == (
            f'attachment; filename="messages-c-{SERVICE}-error-I_O.{format_name}"'
        )
    assert _export(api)["Content-Type"] == "text/csv; charset=utf-8"  # csv unless told
    assert _export(api)["Content-Disposition"] == f'attachment; filename="messages-c-{SERVICE}.csv"'
    # DRF would take ?format= for one of its renderers, and Accept does not change the answer either.
    assert api.get(f"/api/reports/c/{SERVICE}/messages?format=jsonl", HTTP_ACCEPT="application/json").status_code == 200


def test_head_checks_and_answers_the_headers_without_reading_messages(api, written):
    # The view itself, as the web server gets it (the test client drops a HEAD answer's body on its own).
    view = MessagesExportApi.as_view()
    url = f"/api/reports/c/{SERVICE}/messages?severity=error&format=csv"
    response = view(APIRequestFactory().head(url), corpus="c", service=SERVICE)
    assert response.status_code == 200 and response["Content-Type"] == "text/csv; charset=utf-8"
    assert response["Content-Disposition"] == f'attachment; filename="messages-c-{SERVICE}-error.csv"'
    assert b"".join(response.streaming_content) == b""
    whole = view(APIRequestFactory().get(url), corpus="c", service=SERVICE)
    assert len(rows_of(b"".join(whole.streaming_content), "csv")) == 5
    assert api.head(f"/api/reports/c/{SERVICE}/messages?format=xml").status_code == 400


def test_an_empty_slice_is_a_file_with_no_rows(api, written):
    for format_name in FORMATS:
        assert _rows(_export(api, f"?severity=fatal&category=none&format={format_name}"), format_name) == []


def test_bad_input_is_refused_before_anything_is_streamed(api, written):
    problem = _export(api, "?severity=bogus", expect=400).json()
    assert problem["detail"].startswith("Unknown severity 'bogus'") and problem["errors"] == {"severity": ["unknown"]}
    problem = _export(api, "?format=xml", expect=400).json()
    assert problem["detail"] == "Unknown format 'xml'; use one of csv, jsonl, parquet."
    assert _export(api, "?category=undefined", expect=400).json()["errors"] == {"severity": ["required"]}
    assert _export(api, "?severity=error&what=x", expect=400).json()["errors"] == {"category": ["required"]}
    assert api.get(f"/api/reports/nope/{SERVICE}/messages").status_code == 404
    assert api.get("/api/reports/c/nope/messages").status_code == 404
    assert api.post(f"/api/reports/c/{SERVICE}/messages").status_code == 405


def test_the_export_is_public_and_routed_before_the_severity_pages(written):
    anonymous = APIClient()
    response = anonymous.get(f"/api/reports/c/{SERVICE}/messages")
    assert response.status_code == 200 and response["Content-Type"].startswith("text/csv")
    # The severity page of the same shape is still the category report.
    assert anonymous.get(f"/api/reports/c/{SERVICE}/error").json()["severity"] == "error"


def test_batches_hold_the_messages_of_a_few_tasks_each(written):
    batches = list(messages_export(pair_resolve("c", SERVICE)).batches(tasks=2))
    assert [len(batch) for batch in batches] == [2, 2, 2]
    sizes = [len(export_rows(batch)) for batch in batches]
    assert sizes == [sum(len(messages) for _, messages in DOCUMENTS[i : i + 2]) for i in range(0, len(DOCUMENTS), 2)]


def test_the_reading_thread_hands_over_batches_and_errors_and_stops_when_closed():
    batches = iter([[1], [2], []])
    assert list(_read_ahead(lambda: next(batches))) == [[1], [2]]

    def failing() -> list[int]:
        raise RuntimeError("the server went away")

    with pytest.raises(RuntimeError, match="the server went away"):
        list(_read_ahead(failing))
    endless = _read_ahead(lambda: [3])
    assert next(endless) == [3]
    endless.close()  # while the thread waits to hand over the next batch
    assert [thread for thread in threading.enumerate() if thread.name == "messages-export-reader"] == []


def _open_cursors() -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT name FROM pg_cursors")
        return [name for (name,) in cursor.fetchall()]


@pytest.mark.parametrize("format_name", FORMATS)
def test_closing_an_answer_half_sent_closes_its_cursor_and_transaction(written, format_name, monkeypatch):
    """What the web server does when its client goes away (tests/reports/test_messages_export_live.py)."""
    monkeypatch.setattr("reports.serializers.PARQUET_ROW_GROUP", 1)  # a row group, and so a chunk, per task
    depth = len(connection.atomic_blocks)
    chunks = export_chunks(messages_export(pair_resolve("c", SERVICE)).batches(tasks=1), format_name)
    next(chunks)
    if format_name == "csv":
        next(chunks)  # past the header, which comes before the query
    assert len(_open_cursors()) == 1 and len(connection.atomic_blocks) == depth + 1
    chunks.close()
    assert _open_cursors() == [] and len(connection.atomic_blocks) == depth
    with connection.cursor() as cursor:  # the connection is usable as it was
        cursor.execute("SELECT count(*) FROM corpora_task")
        assert cursor.fetchone()[0] > 0


@pytest.mark.parametrize(
    "row",
    [
        ("a", "b", "c", "d", "e", "f", "g"),
        ("a,b", "", "c", "d", "e", "f", ""),
        ('say "x"', "b", "c", "d", "e", "f", "g"),
        ("a", "b", "c", "d", "e", "f", "one\ntwo"),
        ("a", "b", "c", "d", "e", "f", "one\r\ntwo\rthree"),
        ("é", "∑", " lead", "trail ", "\t", "'", "\u2028"),
    ],
)
def test_csv_lines_are_what_the_csv_module_writes(row):
    out = io.StringIO()
    csv.writer(out).writerows([row, ("x",) * 7, row])
    assert CsvLines().of([row, ("x",) * 7, row]) == out.getvalue()
    # A task's lines: its two classes, the second outside the slice, and a plain message beside row's.
    task = (*row[:3], [row[3:6], None], [1, 2, 1, 1], [row[6], "left out", "plain", row[6]])
    out = io.StringIO()
    csv.writer(out).writerows([row, (*row[:6], "plain"), row])
    assert CsvLines().of_tasks([task]) == out.getvalue()
    assert export_rows([task]) == [row, (*row[:6], "plain"), row]
