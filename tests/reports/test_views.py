"""The report screens: twins of /api/reports (same queries and DTOs), links that survive any name,
the result files behind a document, and the writes (rerun, pause, resume, refresh), journaled."""

from __future__ import annotations

import io
import json
import re
import zipfile
from pathlib import Path

import psycopg
import pytest
from django.db import connection
from django.test import Client
from django.utils import timezone

from accounts.models import AuditEntry
from corpora.models import Document, GrainSlice, LogMessage, Run, Task
from dispatcher.ingest import RawResult, result_ingest
from jobs.models import Job
from reports.serializers import PAPER_POLICY
from tests.corpora.helpers import activated, imported
from tests.dispatcher.harness import result_zip
from tests.reports.messages import messages_add

pytestmark = pytest.mark.django_db

LOGS = {
    "warning": "Warning:expected:label Missing label\nWarning:expected:label Again\nStatus:conversion:1\n"
    "Info:runtime_ms:150\n",
    "error": "(Loading /x/article.cls.ltxml...\nWarning:expected:label Missing\n"
    "Error:undefined:\\foo The token \\foo\n\tat doc.tex; line 3\nStatus:conversion:2\nInfo:runtime_ms:2600\n",
    "error2": "Error:undefined:\\foo once\nError:undefined:\\bar twice\nStatus:conversion:2\nInfo:runtime_ms:40\n",
    "fatal": "Fatal:too_many_errors:100 Too many errors\nStatus:conversion:3\nInfo:runtime_ms:70000\n",
    "clean": "Status:conversion:0\nInfo:runtime_ms:90\n",
}
HTML = b'<!DOCTYPE html><html><head><link rel="stylesheet" href="LaTeXML.css"></head><body><p>Hi</p></body></html>'
FILES = {
    "doc.html": HTML,
    "LaTeXML.css": b"p { color: teal }",
    "x.png": b"\x89PNG\r\n\x1a\n",
    # A worker can send any name: these are in the archive, and the file view must still refuse them.
    "../escape.html": b"<p>a member named to climb out of the archive</p>",
    "C:escape.html": b"<p>a drive letter</p>",
    "sub//escape.html": b"<p>an empty segment</p>",
    "sub\\escape.html": b"<p>a backslash</p>",
}
WEIRD_WHAT = "a b/c?d#e"
ODD_NAME = "x y%z"
PAIR = "/reports/c/tex_to_html"
DASH = "\u2013"  # the en dash of the pager's "rows x-y"


def _plain(value: object) -> object:
    return json.loads(json.dumps(value))


@pytest.fixture
def converted(corpus_root: Path, tmp_path: Path, settings) -> list[Task]:
    """Six documents of corpus c: warning, error (named 'x y%z'), error, fatal, no problem, and one TODO.
    Results come through the real ingestion; one message with a what no log line can carry is added."""
    settings.RESULTS_DIR = tmp_path / "results"
    imported(corpus_root, "c", documents=6)
    activated("c")
    tasks = list(Task.objects.filter(corpus__name="c", service__name="tex_to_html").order_by("pk"))
    Document.objects.filter(pk=tasks[1].document_id).update(name=ODD_NAME)
    kinds = ["warning", "error", "error2", "fatal", "clean"]
    Task.objects.filter(pk__in=[t.pk for t in tasks[:5]]).update(status=77)
    batch = [
        RawResult("w", "tex_to_html", str(t.pk), result_zip(LOGS[k], FILES))
        for t, k in zip(tasks[:5], kinds, strict=True)
    ]
    result_ingest(batch, service_ids={"tex_to_html": tasks[0].service_id}, results_dir=settings.RESULTS_DIR,
                  max_bytes=10**7)  # fmt: skip
    messages_add(tasks[1], ("error", "I/O", WEIRD_WHAT, "cannot read\nsecond line"))
    return tasks


def _hrefs(body: str) -> list[str]:
    return re.findall(r'href="([^"]*)"', body)


# --- twins -------------------------------------------------------------------------------------------


def test_the_overview_screen_renders_the_same_dto_as_the_api(client, api, converted):
    screen = client.get(PAIR)
    assert screen.status_code == 200
    assert _plain(screen.context["overview"]) == api.get(f"/api{PAIR}").json()
    body = screen.content.decode()
    for severity in ("no_problem", "warning", "error", "fatal", "invalid", "info"):
        assert f'href="{PAIR}/{severity}"' in body
    assert 'data-count="error">2<' in body and re.search(r'class="seg st-error" x="\d+" width="2"', body)


def test_the_category_screen_renders_the_same_dto_as_the_api(client, api, converted):
    for params in ({}, {"offset": 1, "page_size": 1}):
        screen = client.get(f"{PAIR}/error", params)
        assert screen.status_code == 200
        assert _plain(screen.context["report"]) == api.get(f"/api{PAIR}/error", params).json()
    report = client.get(f"{PAIR}/error").context["report"]
    assert [row["name"] for row in report["rows"]] == ["undefined", "I/O"]
    assert 'data-count="tasks_without_messages">0<' in client.get(f"{PAIR}/error").content.decode()


def test_the_what_screen_renders_the_same_dto_as_the_api(client, api, converted):
    for path in ("/error/undefined", "/error/I%2FO", "/error/I/O"):
        screen = client.get(PAIR + path)
        assert screen.status_code == 200, path
        assert _plain(screen.context["report"]) == api.get(f"/api{PAIR}{path}").json()
    assert client.get(f"{PAIR}/error/I%2FO").context["report"]["category"] == "I/O"


def test_the_entry_list_screen_renders_the_same_dto_as_the_api(client, api, converted):
    for path in ("/error/undefined/%5Cfoo", "/error/I%2FO/a%20b%2Fc%3Fd%23e"):
        screen = client.get(PAIR + path, {"page_size": 5})
        assert screen.status_code == 200, path
        assert _plain(screen.context["entries"]) == api.get(f"/api{PAIR}{path}", {"page_size": 5}).json()
    entries = client.get(f"{PAIR}/error/I%2FO/a%20b%2Fc%3Fd%23e").context["entries"]
    assert (entries["category"], entries["what"]) == ("I/O", WEIRD_WHAT)
    assert [(e["document"], e["status"]) for e in entries["entries"]] == [(ODD_NAME, "error")]


def test_the_document_screen_renders_the_same_dto_as_the_api(client, api, converted):
    screen = client.get("/corpus/c/tex_to_html/document/x%20y%25z")
    assert screen.status_code == 200
    assert _plain(screen.context["document"]) == api.get("/api/corpus/c/tex_to_html/document/x%20y%25z").json()
    assert screen.context["document"]["status"] == "error"


def test_the_runtime_screen_renders_the_same_dto_as_the_api(screen_client, authed, converted):
    for params in ({}, {"offset": 1, "page_size": 2}):
        screen = screen_client.get("/services/tex_to_html/runtimes", params)
        assert screen.status_code == 200
        assert _plain(screen.context["report"]) == authed.get("/api/services/tex_to_html/runtimes", params).json()


# --- reads: what the pages show ------------------------------------------------------------------------


def test_the_corpus_screen_links_each_service_to_its_report(client, converted):
    body = client.get("/corpora/c").content.decode()
    assert f'href="{PAIR}"' in body and 'href="/reports/c/import"' in body


def test_links_escape_slashes_and_reserved_characters_and_lead_to_the_right_pages(client, converted):
    categories = client.get(f"{PAIR}/error").content.decode()
    assert f'href="{PAIR}/error/I%2FO"' in categories and f'href="{PAIR}/error/undefined"' in categories

    whats = client.get(f"{PAIR}/error/I%2FO").content.decode()
    weird = f"{PAIR}/error/I%2FO/a%20b%2Fc%3Fd%23e"
    assert f'href="{weird}"' in whats
    assert f'href="{PAIR}/error/undefined/%5Cfoo"' in client.get(f"{PAIR}/error/undefined").content.decode()

    entries = client.get(weird)
    assert entries.context["entries"]["what"] == WEIRD_WHAT
    document_link = next(h for h in _hrefs(entries.content.decode()) if h.startswith("/corpus/"))
    assert document_link.startswith("/corpus/c/tex_to_html/document/x%20y%25z?")
    document = client.get(document_link.replace("&amp;", "&"))
    assert document.status_code == 200 and document.context["document"]["document"] == ODD_NAME
    labels = [(c["label"], c["href"]) for c in document.context["crumbs"]]
    assert labels == [
        ("Corpora", "/corpora"),
        ("c", "/corpora/c"),
        ("tex_to_html", PAIR),
        ("error", f"{PAIR}/error"),
        ("I/O", f"{PAIR}/error/I%2FO"),
        (WEIRD_WHAT, weird),
        (ODD_NAME, None),
    ]
    assert 'aria-current="page">x y%z<' in document.content.decode()


def test_every_drill_down_page_has_breadcrumbs_up_to_itself(client, converted):
    expected = {
        PAIR: ["Corpora", "c", "tex_to_html"],
        f"{PAIR}/error": ["Corpora", "c", "tex_to_html", "error"],
        f"{PAIR}/error/undefined": ["Corpora", "c", "tex_to_html", "error", "undefined"],
        f"{PAIR}/error/undefined/%5Cfoo": ["Corpora", "c", "tex_to_html", "error", "undefined", "\\foo"],
        "/corpus/c/tex_to_html/document/doc2": ["Corpora", "c", "tex_to_html", "doc2"],
    }
    for path, labels in expected.items():
        response = client.get(path)
        crumbs = response.context["crumbs"]
        assert [c["label"] for c in crumbs] == labels, path
        assert crumbs[-1]["href"] is None and all(c["href"] for c in crumbs[:-1])
        assert 'id="crumbs"' in response.content.decode()


def test_category_pages_link_first_previous_and_next_pages_with_row_numbers(client, converted):
    first = client.get(f"{PAIR}/error", {"page_size": 1})
    assert first.context["pager"] == {
        "start": 1, "end": 1, "count": 2, "first": None, "prev": None, "next": "?offset=1&page_size=1",
    }  # fmt: skip
    body = first.content.decode()
    assert f"rows 1{DASH}1 of 2" in body and 'href="?offset=1&amp;page_size=1" rel="next"' in body

    last = client.get(f"{PAIR}/error", {"offset": 1, "page_size": 1})
    body = last.content.decode()
    assert f"rows 2{DASH}2 of 2" in body and 'rel="next"' not in body
    assert (
        'href="?offset=0&amp;page_size=1" rel="first"' in body and 'href="?offset=0&amp;page_size=1" rel="prev"' in body
    )
    assert [row["name"] for row in last.context["report"]["rows"]] == ["I/O"]


def test_entry_lists_page_forward_until_a_short_page(client, converted):
    base = f"{PAIR}/error/undefined/%5Cfoo"
    first = client.get(base, {"page_size": 1})
    assert f"rows 1{DASH}1" in first.content.decode() and first.context["pager"]["next"] == "?offset=1&page_size=1"
    past = client.get(base, {"offset": 2, "page_size": 1})
    assert past.context["entries"]["entries"] == [] and past.context["pager"]["next"] is None
    assert past.context["pager"]["prev"] == "?offset=1&page_size=1"


def test_bad_pages_and_unknown_names_answer_with_the_apis_status(client, api, converted, settings):
    cases = [
        (f"{PAIR}/error", {"offset": "-1"}),
        (f"{PAIR}/error", {"offset": "x"}),
        (f"{PAIR}/error", {"offset": settings.MAX_REPORT_OFFSET + 1}),
        (f"{PAIR}/bogus", {}),
        ("/reports/c/nope", {}),
        ("/reports/nope/tex_to_html/error", {}),
        (f"{PAIR}/error/no_such_category", {}),
        ("/corpus/c/tex_to_html/document/nope", {}),
    ]
    for path, params in cases:
        screen, twin = client.get(path, params), api.get(f"/api{path}", params)
        assert screen.status_code == twin.status_code and twin.status_code in (400, 404), path
        assert "<h1>" in screen.content.decode()


def test_the_overview_polls_while_tasks_are_in_progress_and_the_fragment_stops_it_after(client, converted):
    page = client.get(PAIR).content.decode()
    assert 'hx-get="?fragment=body" hx-trigger="every 3s"' in page
    assert client.get(PAIR, {"fragment": "body"}).status_code == 200

    Task.objects.filter(pk=converted[5].pk).update(status=-1)
    Run.objects.update(finished_at=timezone.now())
    done = client.get(PAIR, {"fragment": "body"})
    assert done.status_code == 286 and 'data-count="no_problem">2<' in done.content.decode()
    assert "hx-trigger" not in client.get(PAIR).content.decode()


def test_the_overview_keeps_polling_while_a_run_is_open(client, converted):
    Task.objects.filter(pk=converted[5].pk).update(status=-1)
    Run.objects.update(finished_at=timezone.now())
    Run.objects.create(corpus_id=converted[0].corpus_id, service_id=converted[0].service_id, owner="t")
    fragment = client.get(PAIR, {"fragment": "body"})
    assert fragment.status_code == 200 and "A run is in progress" in fragment.content.decode()


def _grain_slice_held(task: Task, severity: str) -> psycopg.Connection:
    """Another session inserts the slice's marker row and keeps its transaction open: a build of that
    slice waits on the unique key until the statement timeout, as a slow build would. (The marker's
    corpus exists only in the test's transaction; the foreign keys are checked at commit, which never comes.)"""
    db = connection.settings_dict
    other = psycopg.connect(
        dbname=db["NAME"], user=db["USER"], password=db["PASSWORD"] or None, host=db["HOST"] or None,
        port=db["PORT"] or None,
    )  # fmt: skip
    other.execute("SET lock_timeout = '5s'")
    other.execute(
        "INSERT INTO corpora_grainslice (corpus_id, service_id, severity, built_at, build_ms)"
        " VALUES (%s, %s, %s, now(), 0)",
        [task.corpus_id, task.service_id, severity],
    )
    return other


def test_a_report_still_being_built_says_so_and_polls_until_it_is_ready(client, api, converted, settings):
    settings.REPORT_BUILD_BUDGET_MS = 300
    other = _grain_slice_held(converted[0], "error")
    try:
        page = client.get(f"{PAIR}/error")
        assert page.status_code == 200 and page.context["report"]["computing"] is True
        assert _plain(page.context["report"]) == api.get(f"/api{PAIR}/error").json()
        body = page.content.decode()
        assert 'id="computing"' in body and "being computed in the background" in body
        assert 'hx-get="?fragment=body&amp;offset=0&amp;page_size=100" hx-trigger="every 3s"' in body
        assert client.get(f"{PAIR}/error", {"fragment": "body"}).status_code == 200
        assert Job.objects.filter(kind="report_slice_build", params__severity="error").count() == 1
    finally:
        other.rollback()
        other.close()
    ready = client.get(f"{PAIR}/error", {"fragment": "body", "offset": 0, "page_size": 100})
    assert ready.status_code == 286 and ready.context["report"]["computing"] is False
    assert 'href="/reports/c/tex_to_html/error/undefined"' in ready.content.decode()
    assert "hx-trigger" not in client.get(f"{PAIR}/error").content.decode()


def test_the_document_screen_groups_messages_by_severity_with_info_folded(client, converted):
    body = client.get("/corpus/c/tex_to_html/document/x%20y%25z").content.decode()
    positions = [body.index(f'id="messages-{severity}"') for severity in ("error", "warning", "info")]
    assert positions == sorted(positions) and 'id="messages-fatal"' not in body
    assert '<details class="messages-group" id="messages-info">' in body
    assert '<td class="details">The token \\foo\nat doc.tex; line 3</td>' in body  # continuation lines kept
    assert 'href="/corpus/c/tex_to_html/document/x%20y%25z/result.zip"' in body
    assert '<iframe class="preview" id="preview" src="/corpus/c/tex_to_html/document/x%20y%25z/html" sandbox' in body


def test_a_document_without_a_result_has_no_file_links_and_its_files_are_404(client, converted):
    body = client.get("/corpus/c/tex_to_html/document/doc5").content.decode()
    assert "no stored result" in body and "<iframe" not in body and "has not been converted yet" in body
    for suffix in ("/result.zip", "/html", "/files/doc.html"):
        assert client.get(f"/corpus/c/tex_to_html/document/doc5{suffix}").status_code == 404, suffix


def test_the_result_archive_downloads_as_the_stored_zip(client, converted, settings):
    response = client.get("/corpus/c/tex_to_html/document/x%20y%25z/result.zip")
    assert response.status_code == 200 and response["Content-Type"] == "application/zip"
    assert response["Content-Disposition"] == 'attachment; filename="x y%z.zip"'
    data = b"".join(response.streaming_content)
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        assert archive.read("doc.html") == HTML


def test_the_html_preview_is_served_under_a_restrictive_policy(client, converted):
    html = client.get("/corpus/c/tex_to_html/document/x%20y%25z/html")
    assert html.status_code == 302 and html["Location"] == "/corpus/c/tex_to_html/document/x%20y%25z/files/doc.html"
    page = client.get(html["Location"])
    assert page.status_code == 200 and page["Content-Type"] == "text/html; charset=utf-8"
    policy = page["Content-Security-Policy"]
    assert "default-src 'none'" in policy and "sandbox" in policy and "script-src" not in policy
    assert page["X-Content-Type-Options"] == "nosniff" and page["X-Frame-Options"] == "SAMEORIGIN"
    assert b"".join(page.streaming_content) == HTML

    css = client.get("/corpus/c/tex_to_html/document/x%20y%25z/files/LaTeXML.css")
    assert css["Content-Type"] == "text/css" and css["Content-Security-Policy"] == policy
    assert client.get("/corpus/c/tex_to_html/document/x%20y%25z/files/x.png")["Content-Type"] == "image/png"


# --- the reader and the paper policy ------------------------------------------------------------------

DOC = "/corpus/c/tex_to_html/document/x%20y%25z"


def test_the_reader_screen_renders_the_document_dto_of_the_api_and_frames_its_html(client, api, converted):
    screen = client.get(f"{DOC}/read")
    assert screen.status_code == 200
    assert _plain(screen.context["document"]) == api.get(f"/api{DOC}").json()
    assert screen.context["document"]["has_html"] is True
    body = screen.content.decode()
    assert f'<iframe class="reader" id="reader" src="{DOC}/html" sandbox title=' in body
    assert f'href="{DOC}"' in body and f'href="{DOC}/result.zip"' in body
    assert 'href="/corpora/c/services/tex_to_html/documents"' in body  # back to the pair's documents


def test_the_document_screen_links_its_reader_when_there_is_html(client, converted):
    body = client.get(DOC).content.decode()
    assert 'id="reader-link">read the paper</a>' in body and f'href="{DOC}/read"' in body
    assert 'id="no-html"' not in body


@pytest.fixture
def without_html(converted, settings) -> Task:
    """doc5 of corpus c converted fatally: its stored result holds only its log."""
    task = converted[5]
    Task.objects.filter(pk=task.pk).update(status=77)
    result_ingest([RawResult("w", "tex_to_html", str(task.pk), result_zip(LOGS["fatal"], {}))],
                  service_ids={"tex_to_html": task.service_id}, results_dir=settings.RESULTS_DIR,
                  max_bytes=10**7)  # fmt: skip
    return task


def test_a_document_whose_result_holds_no_html_says_so_and_offers_no_frame_or_reader(client, api, without_html):
    document = api.get("/api/corpus/c/tex_to_html/document/doc5").json()
    assert (document["status"], document["has_html"], document["html_url"]) == ("fatal", False, None)
    assert document["result_url"] == "/corpus/c/tex_to_html/document/doc5/result.zip"
    screen = client.get("/corpus/c/tex_to_html/document/doc5")
    assert _plain(screen.context["document"]) == document
    body = screen.content.decode()
    assert "<iframe" not in body and "/doc5/read" not in body and "/doc5/html" not in body
    assert '<p class="muted" id="no-html">No HTML: the stored result holds no converted paper.</p>' in body
    assert 'id="no-html-note">no HTML in it<' in body
    assert 'href="/corpus/c/tex_to_html/document/doc5/result.zip"' in body


@pytest.mark.parametrize("document", ["doc5", "nope"])
@pytest.mark.parametrize("suffix", ["/read", "/html", "/files/doc.html"])
def test_the_reader_and_the_paper_of_a_document_without_html_are_a_plain_404(client, api, without_html, document,
                                                                             suffix):  # fmt: skip
    response = client.get(f"/corpus/c/tex_to_html/document/{document}{suffix}")
    assert response.status_code == 404 and response["Content-Type"] == "text/plain; charset=utf-8"
    assert response["X-Content-Type-Options"] == "nosniff"
    text = response.content.decode()
    assert "<" not in text and text.startswith("No ")  # words alone, no page of the application
    if suffix != "/read":
        twin = api.get(f"/api/corpus/c/tex_to_html/document/{document}{suffix}")
        assert twin.status_code == 404 and twin.json()["detail"] == text.strip()


def test_the_reader_of_a_document_not_converted_yet_is_a_plain_404(client, converted):
    response = client.get("/corpus/c/tex_to_html/document/doc5/read")
    assert response.status_code == 404 and response.content.decode().startswith("No HTML:")


def test_the_api_serves_the_papers_files_as_the_screens_do(client, api, converted):
    assert api.get(f"/api{DOC}/html")["Location"] == f"/api{DOC}/files/doc.html"
    for member, kind in (("doc.html", "text/html; charset=utf-8"), ("LaTeXML.css", "text/css"), ("x.png", "image/png")):
        screen, twin = client.get(f"{DOC}/files/{member}"), api.get(f"/api{DOC}/files/{member}")
        assert screen.status_code == twin.status_code == 200, member
        assert b"".join(screen.streaming_content) == b"".join(twin.streaming_content) == FILES[member]
        for header in ("Content-Type", "Content-Security-Policy", "X-Content-Type-Options", "X-Frame-Options"):
            assert screen[header] == twin[header], (member, header)
        assert screen["Content-Type"] == kind and screen["Content-Security-Policy"] == PAPER_POLICY, member
    # A browser that asks for HTML first gets the file too, not a refusal of what it accepts.
    assert api.get(f"/api{DOC}/files/x.png", HTTP_ACCEPT="text/html,*/*;q=0.8").status_code == 200
    assert api.get(f"/api{DOC}/files/missing.png").status_code == 404


def test_the_paper_policy_lets_nothing_run_and_nothing_load_from_elsewhere():
    directives = {part.split()[0]: part.split()[1:] for part in PAPER_POLICY.split("; ")}
    assert directives["sandbox"] == []  # no allow-scripts, no allow-same-origin, no allow-forms
    assert directives["default-src"] == ["'none'"] and "script-src" not in directives
    assert directives["img-src"] == ["'self'", "data:"] and directives["font-src"] == ["'self'", "data:"]
    assert directives["style-src"] == ["'self'", "'unsafe-inline'"]
    assert directives["form-action"] == ["'none'"] and directives["base-uri"] == ["'none'"]
    assert directives["frame-ancestors"] == ["'self'"]


def test_archive_members_outside_the_archive_or_absent_are_refused(client, converted):
    base = "/corpus/c/tex_to_html/document/x%20y%25z/files/"
    for member in ("../escape.html", "%2E%2E/escape.html", "sub/../../escape.html", "%2Fetc/passwd",
                   "..%5Cescape.html", "C:%5Cx", "C:escape.html", "sub//escape.html", "sub%5Cescape.html",
                   "missing.png"):  # fmt: skip
        assert client.get(base + member).status_code == 404, member
    assert client.get(base + "LaTeXML.css").status_code == 200  # the same archive, a name that stays inside


def test_the_runtime_screen_needs_sign_in_and_draws_one_bar_per_bucket(screen_client, converted):
    assert Client().get("/services/tex_to_html/runtimes").status_code == 302
    response = screen_client.get("/services/tex_to_html/runtimes")
    histogram = response.context["report"]["histogram"]
    svg = response.content.decode()
    svg = svg[svg.index('<svg id="histogram"') : svg.index("</svg>")]
    bars = [
        (int(c), float(h)) for c, h in re.findall(r'<rect class="bar" data-count="(\d+)"[^>]* height="([\d.]+)"', svg)
    ]
    assert [count for count, _ in bars] == [bucket["count"] for bucket in histogram] and len(bars) == 12
    peak = max(count for count, _ in bars)
    for count, height in bars:
        assert height == pytest.approx(160 * count / peak, abs=0.01)
    assert sum(count for count, _ in bars) == 5 and "&lt; 100 ms" in svg and "≥ 5 min" in svg
    assert 'href="/corpus/c/tex_to_html/document/x%20y%25z"' in response.content.decode()
    assert f"rows 1{DASH}5 of 5" in response.content.decode()


def test_anonymous_readers_see_no_write_controls(client, converted):
    for path in (PAIR, f"{PAIR}/error", f"{PAIR}/error/undefined", f"{PAIR}/error/undefined/%5Cfoo"):
        body = client.get(path).content.decode()
        assert "/rerun" not in body and "/pause" not in body, path


# --- writes ------------------------------------------------------------------------------------------


def test_the_rerun_form_sets_the_slice_to_todo_and_is_journaled(screen_client, converted):
    page = screen_client.get(f"{PAIR}/error/undefined/%5Cfoo").content.decode()
    assert f'action="{PAIR}/rerun"' in page and 'name="what" value="\\foo"' in page
    response = screen_client.post(
        f"{PAIR}/rerun",
        {"severity": "error", "category": "undefined", "what": "\\foo", "description": "",
         "next": f"{PAIR}/error/undefined"},
    )  # fmt: skip
    assert response.status_code == 302 and response["Location"] == f"{PAIR}/error/undefined"
    assert Task.objects.get(pk=converted[1].pk).status == 0 and Task.objects.get(pk=converted[2].pk).status == 0
    assert Task.objects.get(pk=converted[0].pk).status == -2  # outside the slice
    assert not LogMessage.objects.filter(task_id=converted[1].pk).exists()
    run = Run.objects.filter(finished_at__isnull=True).get()
    assert run.owner == "tester"
    entry = AuditEntry.objects.get(action="reports.rerun")
    assert (entry.actor, entry.target, entry.outcome, entry.params["what"]) == (
        "tester",
        "c/tex_to_html",
        "ok",
        "\\foo",
    )
    assert "csrfmiddlewaretoken" not in entry.params
    followed = screen_client.get(response["Location"])
    link = f'<a href="/runs/c/tex_to_html#run-{run.pk}">run {run.pk}</a>'
    assert f"2 tasks set to TODO in {link}." in followed.content.decode()


def test_rerun_all_from_the_overview_covers_every_finished_task(screen_client, converted):
    response = screen_client.post(f"{PAIR}/rerun", {"description": "after the fix", "next": "https://evil.example/"})
    assert response.status_code == 302 and response["Location"] == PAIR  # never another site
    assert set(Task.objects.filter(corpus__name="c", service__name="tex_to_html").values_list("status", flat=True)) == {
        0
    }
    assert Run.objects.get(finished_at__isnull=True).description == "after the fix"


def test_a_refused_rerun_shows_the_apis_error_and_status_and_changes_nothing(screen_client, authed, converted):
    bad = screen_client.post(f"{PAIR}/rerun", {"severity": "bogus"})
    twin = authed.post(f"/api{PAIR}/rerun?severity=bogus")
    assert bad.status_code == 400 == twin.status_code and "Unknown severity" in bad.content.decode()
    narrow = screen_client.post(f"{PAIR}/rerun", {"category": "undefined"})
    assert narrow.status_code == 400 and "pass severity too" in narrow.content.decode()
    assert screen_client.post("/reports/c/nope/rerun", {"severity": "error"}).status_code == 404
    assert Task.objects.filter(corpus__name="c", service__name="tex_to_html", status=0).count() == 1
    journal = AuditEntry.objects.filter(action="reports.rerun", actor="tester")
    # Three refusals of the screen and one of the API twin, each with its status.
    assert sorted(journal.values_list("status_code", flat=True)) == [400, 400, 400, 404]


def test_writes_need_a_signed_in_operator(client, converted):
    for action in ("rerun", "pause", "resume", "refresh"):
        response = client.post(f"{PAIR}/{action}", {"severity": "error"})
        assert response.status_code == 302 and response["Location"].startswith("/login"), action
    assert Task.objects.filter(corpus__name="c", service__name="tex_to_html", status=0).count() == 1
    assert client.get(f"{PAIR}/rerun").status_code == 302


def test_writes_answer_get_with_405(screen_client, converted):
    for action in ("rerun", "pause", "resume", "refresh"):
        assert screen_client.get(f"{PAIR}/{action}").status_code == 405, action


def test_every_report_level_offers_a_rerun_of_its_own_scope(screen_client, converted):
    def forms(path: str) -> list[dict[str, str]]:
        body = screen_client.get(path).content.decode()
        found = []
        for form in re.findall(r'<form method="post" action="/reports/c/tex_to_html/rerun".*?</form>', body, re.S):
            fields = dict(re.findall(r'type="hidden" name="(severity|category|what)" value="([^"]*)"', form))
            found.append(fields)
        return found

    assert forms(PAIR) == [{}]
    assert forms(f"{PAIR}/error") == [
        {"severity": "error"},
        {"severity": "error", "category": "undefined"},
        {"severity": "error", "category": "I/O"},
    ]
    assert forms(f"{PAIR}/error/undefined") == [
        {"severity": "error", "category": "undefined"},
        {"severity": "error", "category": "undefined", "what": "\\foo"},
        {"severity": "error", "category": "undefined", "what": "\\bar"},
    ]
    assert forms(f"{PAIR}/error/I%2FO/a%20b%2Fc%3Fd%23e") == [
        {"severity": "error", "category": "I/O", "what": WEIRD_WHAT},
    ]


def test_pause_resume_and_refresh_from_the_overview_are_journaled(screen_client, converted):
    paused = screen_client.post(f"{PAIR}/pause", follow=True)
    assert paused.redirect_chain == [(PAIR, 302)] and "Paused: 1 tasks in progress blocked." in paused.content.decode()
    assert Task.objects.get(pk=converted[5].pk).status == -6
    resumed = screen_client.post(f"{PAIR}/resume", follow=True)
    assert "Resumed: 1 blocked tasks back to TODO." in resumed.content.decode()
    assert Task.objects.get(pk=converted[5].pk).status == 0

    screen_client.get(f"{PAIR}/error")  # builds the error slice
    assert GrainSlice.objects.filter(severity="error").count() == 1
    refreshed = screen_client.post(f"{PAIR}/refresh", follow=True)
    assert "Cleared 1 report slices" in refreshed.content.decode() and not GrainSlice.objects.exists()
    actions = list(AuditEntry.objects.filter(actor="tester").order_by("pk").values_list("action", "target", "outcome"))
    assert actions[-3:] == [
        ("conversions.pause", "c/tex_to_html", "ok"),
        ("conversions.resume", "c/tex_to_html", "ok"),
        ("reports.refresh_pair", "c/tex_to_html", "ok"),
    ]
    assert screen_client.post("/reports/c/nope/pause").status_code == 404
