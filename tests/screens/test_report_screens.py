"""The report screens in real headless Chromium (Debian's, driven by Playwright): drill from a corpus
down to one document by clicking, with breadcrumbs at every level, and see the converted HTML previewed
(its image and style load under the preview's policy, in a sandboxed frame)."""

from __future__ import annotations

import struct
import zlib
from typing import Any

import pytest
from rest_framework.test import APIClient

from corpora.models import Document, Task
from dispatcher.ingest import RawResult, result_ingest
from tests.corpora.helpers import activated, imported
from tests.dispatcher.harness import result_zip
from tests.reports.messages import messages_add

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

ERROR_LOG = (
    "(Loading /usr/share/perl5/LaTeXML/Package/article.cls.ltxml...\n"
    "Warning:expected:label Missing label target\n"
    "Error:undefined:\\foo The token \\foo is not defined.\n\tat doc.tex; line 3\n"
    "Status:conversion:2\nInfo:runtime_ms:2600\n"
)
HTML = (
    b'<!DOCTYPE html><html><head><meta charset="utf-8"><link rel="stylesheet" href="LaTeXML.css"></head>'
    b'<body><h1 class="ltx_title">A converted paper</h1><p>Some text, and a figure:</p>'
    b'<img id="figure" src="figure.png" alt="figure"></body></html>'
)
CSS = b"body { font-family: serif; margin: 2rem; } .ltx_title { color: #2f5bd3; }"


def _png(width: int, height: int, rgb: tuple[int, int, int]) -> bytes:
    """A plain one-colour PNG, written by hand so the test needs no imaging library."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    rows = b"".join(b"\x00" + bytes(rgb) * width for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")


@pytest.fixture
def converted(corpus_root, tmp_path, settings) -> list[Task]:
    """Corpus c on tex_to_html: the document 'x y%z' failed with errors (one under category I/O with a
    what full of reserved characters), two converted cleanly, one is still TODO."""
    settings.RESULTS_DIR = tmp_path / "results"
    imported(corpus_root, "c", documents=4)
    activated("c")
    tasks = list(Task.objects.filter(corpus__name="c", service__name="tex_to_html").order_by("pk"))
    Document.objects.filter(pk=tasks[0].document_id).update(name="x y%z")
    Task.objects.filter(pk__in=[t.pk for t in tasks[:3]]).update(status=77)
    files = {"paper.html": HTML, "LaTeXML.css": CSS, "figure.png": _png(120, 60, (31, 157, 85))}
    logs = [ERROR_LOG, "Status:conversion:0\nInfo:runtime_ms:90\n", "Status:conversion:0\nInfo:runtime_ms:120\n"]
    batch = [
        RawResult("w", "tex_to_html", str(t.pk), result_zip(log, files)) for t, log in zip(tasks[:3], logs, strict=True)
    ]
    result_ingest(batch, service_ids={"tex_to_html": tasks[0].service_id}, results_dir=settings.RESULTS_DIR,
                  max_bytes=10**7)  # fmt: skip
    messages_add(tasks[0], ("error", "I/O", "a b/c?d#e", "could not read the file\n\tsecond line"))
    return tasks


def _crumbs(page: Any) -> list[str]:
    return [text.strip() for text in page.inner_text("#crumbs").split("\u203a")]


def test_an_operator_drills_from_a_corpus_down_to_a_document(page, live_server, token, converted, tmp_path):
    page.goto(f"{live_server.url}/login?next=/corpora/c")
    page.fill("#token", token)
    page.click("button[type=submit]")
    page.wait_for_url(f"{live_server.url}/corpora/c")

    page.click("tr[data-service='tex_to_html'] a:has-text('tex_to_html')")
    page.wait_for_url(f"{live_server.url}/reports/c/tex_to_html")
    assert _crumbs(page) == ["Corpora", "c", "tex_to_html"]
    assert page.inner_text("#status-counts [data-count='error']") == "1"
    assert page.inner_text("#status-counts [data-count='no_problem']") == "2"
    assert page.locator("#manage button", has_text="Pause").count() == 1
    page.screenshot(path=tmp_path / "report-overview.png", full_page=True)

    page.click("tr[data-status='error'] a")
    page.wait_for_url(f"{live_server.url}/reports/c/tex_to_html/error")
    assert _crumbs(page) == ["Corpora", "c", "tex_to_html", "error"]
    assert page.locator("#report-rows tbody tr").count() == 2
    # Each category row says what the category means at this severity, as the API's row does.
    api_rows = {row["name"]: row for row in APIClient().get("/api/reports/c/tex_to_html/error").json()["rows"]}
    shown = page.inner_text("tr[data-name='undefined'] .meaning")
    assert api_rows["undefined"]["meaning"] in shown and "command name" in shown

    page.click("#report-rows a:text-is('I/O')")
    page.wait_for_url(f"{live_server.url}/reports/c/tex_to_html/error/I%2FO")
    assert _crumbs(page) == ["Corpora", "c", "tex_to_html", "error", "I/O"]
    assert "auxiliary file" in page.inner_text("#category-meaning")
    assert "file name" in page.inner_text("#category-meaning")

    page.click("#report-rows a:text-is('a b/c?d#e')")
    page.wait_for_url(f"{live_server.url}/reports/c/tex_to_html/error/I%2FO/a%20b%2Fc%3Fd%23e")
    assert _crumbs(page) == ["Corpora", "c", "tex_to_html", "error", "I/O", "a b/c?d#e"]
    assert "could not read the file" in page.inner_text("tr[data-document='x y%z']")
    page.screenshot(path=tmp_path / "report-entries.png", full_page=True)

    page.click("#entries a:text-is('x y%z')")
    page.wait_for_url("**/corpus/c/tex_to_html/document/x%20y%25z?**")
    assert _crumbs(page) == ["Corpora", "c", "tex_to_html", "error", "I/O", "a b/c?d#e", "x y%z"]
    assert page.inner_text("#document-status") == "error"
    # The page opens with the document's conversion in words, as its report's `explanation` says it.
    explanation = APIClient().get("/api/corpus/c/tex_to_html/document/x%20y%25z").json()["explanation"]
    assert page.inner_text("#explanation-summary") == explanation["summary"]
    assert explanation["summary"].startswith("Converted with 2 errors")
    causes = page.locator("#explanation-causes li")
    assert causes.count() == len(explanation["causes"]) == 2
    assert explanation["causes"][0]["meaning"] in causes.nth(0).inner_text()
    assert page.locator("#messages-error tbody tr").count() == 2
    assert not page.locator("#messages-info table").is_visible()  # info is folded away
    page.click("#messages-info summary")
    assert page.locator("#messages-info table").is_visible()

    # The preview loads in its sandbox, with its own style and figure under the preview's policy.
    preview = page.frame_locator("#preview")
    preview.locator("h1").wait_for()
    assert preview.locator("h1").inner_text() == "A converted paper"
    page.wait_for_function(
        "() => { const f = document.querySelector('#preview').contentDocument; return f === null; }"
    )  # sandboxed: the page cannot reach into the frame
    image = preview.locator("#figure")
    page.locator("#preview").scroll_into_view_if_needed()  # below the fold: the frame first, then its image
    image.scroll_into_view_if_needed()
    assert image.evaluate("img => img.complete && img.naturalWidth") == 120
    assert preview.locator("h1").evaluate("h => getComputedStyle(h).color") == "rgb(47, 91, 211)"
    page.screenshot(path=tmp_path / "report-document.png", full_page=True)

    # Up again through the breadcrumbs.
    page.click("#crumbs a:text-is('I/O')")
    page.wait_for_url(f"{live_server.url}/reports/c/tex_to_html/error/I%2FO")
    assert page.locator("#report-rows tbody tr").count() == 1
