"""Reading converted papers in real headless Chromium (Debian's, driven by Playwright): a paper that the real
LaTeXML converted is found in its corpus's document list and read whole, its figure, style and MathML
shown; a hostile paper (script inline and from a file, event handlers, a javascript: link, SVG with
script, a meta refresh, forms posting away and to the API) shows the same way and acts in no way, in the
reader's frame and opened alone, from the screens and from the API. A control run serves the same hostile
files without the policy and sees every one of them act, so the test would see a policy that let one through.
"""

from __future__ import annotations

import io
import mimetypes
import threading
import time
import zipfile
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from accounts.models import AuditEntry
from conversion.worker import convert_payload
from corpora.models import Document, Task
from dispatcher.ingest import RawResult, result_ingest
from tests.corpora.helpers import activated, imported
from tests.dispatcher.harness import result_zip
from tests.screens.test_report_screens import _png

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

PAPER_TEX = r"""\documentclass{article}
\usepackage{graphicx}
\usepackage{amsmath}
\title{On the Sum of Two Squares}
\author{A. Reader}
\begin{document}
\maketitle
\begin{abstract}
We read a converted paper: its text, a figure and its formulas.
\end{abstract}
\section{Introduction}
For a right triangle with legs $a$ and $b$ and hypotenuse $c$,
\begin{equation}\label{eq:py}
  a^2 + b^2 = c^2, \qquad \frac{a}{c} = \sin\alpha .
\end{equation}
Summing, $\sum_{k=1}^{n} k = \frac{n(n+1)}{2}$ and $\int_0^1 x^2\,dx = \tfrac13$.
\begin{figure}[h]
\centering
\includegraphics[width=0.4\textwidth]{figure.png}
\caption{A green rectangle.}\label{fig:green}
\end{figure}
Figure~\ref{fig:green} shows it, and Equation~\eqref{eq:py} is Pythagoras's.
\end{document}
"""
BASE = "/corpus/c/tex_to_html/document"


@pytest.fixture(scope="module")
def latexml_result() -> bytes:
    """The result ZIP a worker sends for PAPER_TEX: the real latexmlc, in its sandbox."""
    payload = io.BytesIO()
    with zipfile.ZipFile(payload, "w") as archive:
        archive.writestr("paper.tex", PAPER_TEX)
        archive.writestr("figure.png", _png(240, 120, (31, 157, 85)))
    result = convert_payload(payload.getvalue())
    with zipfile.ZipFile(io.BytesIO(result)) as archive:
        assert "paper.html" in archive.namelist(), archive.read("cortex.log").decode(errors="replace")[-2000:]
    return result


class Witness:
    """A server of the test's own, on another origin: it serves the hostile paper's files under /paper/
    without any policy (the control run), and records every other request that reaches it (a form, a
    refresh, a script's fetch, a remote script, style or image), answering 204, which leaves a page where
    it is."""

    def __init__(self, files: dict[str, bytes]) -> None:
        self.files = files
        self.seen: list[tuple[str, str]] = []
        witness = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                member = self.path.removeprefix("/paper/")
                if self.path.startswith("/paper/") and member in witness.files:
                    body = witness.files[member]
                    self.send_response(200)
                    self.send_header("Content-Type", mimetypes.guess_type(member)[0] or "application/octet-stream")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                    return
                self._seen()

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                self._seen()

            def _seen(self) -> None:
                witness.seen.append((self.command, self.path))
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def paths(self) -> set[str]:
        return {path for _method, path in self.seen}


def hostile_files(files: dict[str, bytes], witness: str) -> dict[str, bytes]:
    """The converted paper with every way its author could try to act: each marks the page (a data-*
    attribute on <html>) or calls the witness when it runs."""
    mark = "document.documentElement.dataset.{} = 'ran'"
    head = (
        f'<meta http-equiv="refresh" content="0;url={witness}/refresh">'
        f'<link rel="stylesheet" href="{witness}/remote.css"><script src="{witness}/remote.js"></script>'
    )
    body = (
        f"<script>{mark.format('inline')}; fetch('{witness}/fetch-inline', {{mode: 'no-cors'}});</script>"
        '<script src="evil.js"></script>'
        f'<img id="broken" src="missing.png" onerror="{mark.format("onerror")}">'
        f'<p><a id="js-link" href="javascript:void({mark.format("link")})">a javascript: link</a></p>'
        '<object id="svg-object" data="evil.svg" type="image/svg+xml"></object>'
        '<iframe id="svg-frame" src="evil.svg"></iframe>'
        f'<img id="remote-image" src="{witness}/pixel.png" alt="">'
        f'<form method="post" action="{witness}/form"><button id="post-away">post away</button></form>'
        '<form method="post" action="/api/reports/c/tex_to_html/refresh"><input type="hidden" name="x" value="1">'
        '<button id="post-api">post to the API</button></form>'
    )
    html = files["paper.html"].decode()
    html = html.replace("</head>", head + "</head>", 1).replace("</body>", body + "</body>", 1)
    html = html.replace("<body>", f'<body onload="{mark.format("onload")}">', 1)
    svg = (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="40" height="40" onload="fetch(\'{witness}/svg-onload\', '
        "{mode: 'no-cors'})\"><script>document.documentElement.setAttribute('data-ran', 'script');"
        f" fetch('{witness}/svg-script', {{mode: 'no-cors'}});</script>"
        '<rect width="40" height="40" fill="red"/></svg>'
    )
    evil = f"{mark.format('external')}; fetch('{witness}/fetch-external', {{mode: 'no-cors'}});"
    return {**files, "paper.html": html.encode(), "evil.js": evil.encode(), "evil.svg": svg.encode()}


MARKS = ("inline", "external", "onerror", "onload", "link")


@pytest.fixture
def witness(latexml_result: bytes) -> Iterator[Witness]:
    with zipfile.ZipFile(io.BytesIO(latexml_result)) as archive:
        files = {name: archive.read(name) for name in archive.namelist() if name != "cortex.log"}
    server = Witness({})
    server.files = hostile_files(files, server.url)
    server.thread.start()
    yield server
    server.server.shutdown()
    server.server.server_close()


@pytest.fixture
def papers(corpus_root, tmp_path, settings, latexml_result: bytes, witness: Witness) -> list[Task]:
    """Corpus c on tex_to_html: 'paper' as LaTeXML converted it, 'hostile' the same with the witness's
    attacks in it, 'no-html' fatal with only its log, and one TODO; all through the real ingestion."""
    settings.RESULTS_DIR = tmp_path / "results"
    imported(corpus_root, "c", documents=4)
    activated("c")
    tasks = list(Task.objects.filter(corpus__name="c", service__name="tex_to_html").order_by("pk"))
    for task, name in zip(tasks, ["paper", "hostile", "no-html", "waiting"], strict=True):
        Document.objects.filter(pk=task.document_id).update(name=name)
    with zipfile.ZipFile(io.BytesIO(latexml_result)) as archive:
        log = archive.read("cortex.log")
    results = [
        latexml_result,
        result_zip(log, witness.files),
        result_zip("Fatal:too_many_errors:100 Too many errors\nStatus:conversion:3\n"),
    ]
    Task.objects.filter(pk__in=[t.pk for t in tasks[:3]]).update(status=77)
    batch = [RawResult("w", "tex_to_html", str(t.pk), data) for t, data in zip(tasks[:3], results, strict=True)]
    result_ingest(batch, service_ids={"tex_to_html": tasks[0].service_id}, results_dir=settings.RESULTS_DIR,
                  max_bytes=10**7)  # fmt: skip
    return tasks


def _sign_in(page: Any, live_server: Any, token: str) -> None:
    page.goto(f"{live_server.url}/login")
    page.fill("#token", token)
    page.click("button[type=submit]")
    page.wait_for_url(f"{live_server.url}/corpora")


def _shows_the_paper(scope: Any) -> None:
    """The converted paper shown as LaTeXML made it: its figure loaded, its two style sheets applied, and
    its MathML laid out by the browser (a fraction's numerator above its denominator)."""
    scope.locator("h1.ltx_title_document").wait_for()
    assert scope.locator("h1.ltx_title_document").inner_text() == "On the Sum of Two Squares"
    figure = scope.locator("figure img.ltx_graphics")
    figure.scroll_into_view_if_needed()
    assert figure.evaluate("img => img.complete && img.naturalWidth") == 240
    # ltx-article.css centres the title; LaTeXML.css makes a centred image a block (an image is inline).
    assert scope.locator("h1.ltx_title_document").evaluate("h => getComputedStyle(h).textAlign") == "center"
    assert figure.evaluate("img => getComputedStyle(img).display") == "block"
    equation = scope.locator("[id='S1.E1.m1']")
    box = equation.bounding_box()
    assert box and box["width"] > 50 and box["height"] > 10
    numerator, denominator = (scope.locator("[id='S1.E1.m1'] mfrac > mi").nth(i).bounding_box() for i in (0, 1))
    assert numerator and denominator and numerator["y"] + numerator["height"] <= denominator["y"] + 1


def _acts_in_no_way(scope: Any) -> None:
    """Nothing of the hostile paper ran: no mark on the page, even after its link and its forms are used."""
    scope.locator("#js-link").click()
    scope.locator("#post-away").click()
    scope.locator("#post-api").click()
    html = scope.locator("html")
    assert {mark: html.get_attribute(f"data-{mark}") for mark in MARKS} == dict.fromkeys(MARKS)


def _eventually(condition: Any, seconds: float = 10.0) -> bool:
    """Whether `condition()` holds within `seconds` (checked every 50 ms): the witness hears requests in
    its own thread, after the browser sent them."""
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


# --- the control: the same files with no policy act in every way -----------------------------------------


def test_without_the_policy_every_attack_of_the_hostile_paper_acts(page, witness):
    page.goto(f"{witness.url}/paper/paper.html")
    page.wait_for_function(
        "() => ['inline', 'external', 'onerror', 'onload'].every(m => document.documentElement.dataset[m])"
    )
    page.click("#js-link")
    page.wait_for_function("() => document.documentElement.dataset.link === 'ran'")
    page.click("#post-away")
    page.click("#post-api")
    page.goto(f"{witness.url}/paper/evil.svg")
    assert page.locator("svg").get_attribute("data-ran") == "script"
    acted = {
        "/refresh", "/remote.css", "/remote.js", "/pixel.png", "/fetch-inline", "/fetch-external", "/form",
        "/api/reports/c/tex_to_html/refresh", "/svg-script", "/svg-onload",
    }  # fmt: skip
    assert _eventually(lambda: acted <= witness.paths()), acted - witness.paths()


# --- finding and reading a paper -------------------------------------------------------------------------


def test_an_operator_finds_a_paper_in_its_corpus_and_reads_it(page, live_server, token, papers, tmp_path):
    _sign_in(page, live_server, token)
    page.goto(f"{live_server.url}/corpora/c")
    page.click("tr[data-service='tex_to_html'] a.documents-link")
    page.wait_for_url(f"{live_server.url}/corpora/c/services/tex_to_html/documents")
    rows = page.locator("#documents tbody tr")
    assert [rows.nth(i).get_attribute("data-document") for i in range(rows.count())] == [
        "hostile", "no-html", "paper", "waiting",
    ]  # fmt: skip
    assert page.locator("tr[data-document='paper'] a.reader-link").count() == 1
    assert page.locator("tr[data-document='no-html'] a.reader-link").count() == 0
    assert page.inner_text("tr[data-document='no-html'] td:last-child") == "no HTML"
    assert page.inner_text("tr[data-document='paper'] .badge") == "no_problem"
    page.screenshot(path=tmp_path / "documents.png", full_page=True)

    page.select_option("#f-status", "fatal")
    page.click("#document-filters button[type=submit]")
    page.wait_for_url(lambda url: "status=fatal" in url)
    assert page.locator("#documents tbody tr").count() == 1
    assert page.locator("tr[data-document='no-html']").count() == 1
    page.fill("#f-name", "PA")
    page.select_option("#f-status", "")
    page.click("#document-filters button[type=submit]")
    page.wait_for_url(lambda url: "name_prefix=PA" in url and "status=fatal" not in url)
    assert [page.locator("#documents tbody tr").nth(0).get_attribute("data-document")] == ["paper"]
    assert page.locator("#documents tbody tr").count() == 1

    page.click("tr[data-document='paper'] a.reader-link")
    page.wait_for_url(f"{live_server.url}{BASE}/paper/read")
    assert page.locator("#reader").get_attribute("sandbox") == ""
    assert page.inner_text("#reader-status") == "no_problem"
    _shows_the_paper(page.frame_locator("#reader"))
    page.screenshot(path=tmp_path / "reader.png")
    page.click("#reader-document")
    page.wait_for_url(f"{live_server.url}{BASE}/paper")
    assert page.locator("#preview").count() == 1 and page.locator("#reader-link").count() == 1


def test_a_document_without_html_offers_no_frame_and_no_reader(page, live_server, papers):
    page.goto(f"{live_server.url}{BASE}/no-html")
    assert page.locator("#preview").count() == 0 and page.locator("#reader-link").count() == 0
    assert page.inner_text("#no-html") == "No HTML: the stored result holds no converted paper."
    for path in (f"{BASE}/no-html/read", f"{BASE}/no-html/html", f"{BASE}/waiting/read"):
        response = page.goto(f"{live_server.url}{path}")
        assert response.status == 404, path
        assert response.headers["content-type"] == "text/plain; charset=utf-8", path
        assert page.inner_text("body").startswith("No "), path
        assert page.locator("header.top").count() == 0, path  # the plain words, no page of the application


# --- a hostile paper shows and cannot act ----------------------------------------------------------------


def _requests(page: Any) -> list[Any]:
    seen: list[Any] = []
    page.on("request", lambda request: seen.append(request))
    return seen


def test_a_hostile_paper_in_the_reader_shows_and_cannot_act(page, live_server, token, papers, witness):
    _sign_in(page, live_server, token)
    journal = AuditEntry.objects.count()
    requests = _requests(page)
    page.goto(f"{live_server.url}{BASE}/hostile/read")
    paper = page.frame_locator("#reader")
    _shows_the_paper(paper)
    _acts_in_no_way(paper)
    assert witness.seen == []  # (the browser reports the requests it then blocks: the witness heard none)
    assert [(r.method, r.url) for r in requests if r.method != "GET"] == []
    assert AuditEntry.objects.count() == journal
    # The paper has an opaque origin, so what it asks for (its style, its images) goes without the
    # operator's session cookie (SameSite=Lax); the reader page and the frame's navigation carry it.
    asked = [r for r in requests if "/document/hostile/files/" in r.url and r.resource_type != "document"]
    assert {r.url.rsplit("/", 1)[-1] for r in asked} >= {"LaTeXML.css", "ltx-article.css", "figure.png"}
    assert [r.url for r in asked if "sessionid" in r.all_headers().get("cookie", "")] == []
    assert "sessionid" in requests[0].all_headers().get("cookie", "") and requests[0].url.endswith("/hostile/read")


@pytest.mark.parametrize("prefix", ["", "/api"], ids=["screen", "api"])
def test_a_hostile_paper_opened_alone_shows_and_cannot_act(page, live_server, papers, witness, prefix):
    requests = _requests(page)
    response = page.goto(f"{live_server.url}{prefix}{BASE}/hostile/html")
    assert page.url == f"{live_server.url}{prefix}{BASE}/hostile/files/paper.html"
    assert response.headers["content-security-policy"].startswith("sandbox;")
    _shows_the_paper(page)
    _acts_in_no_way(page)
    page.goto(f"{live_server.url}{prefix}{BASE}/hostile/files/evil.svg")
    assert page.locator("svg").get_attribute("data-ran") is None
    assert witness.seen == []
    assert [(r.method, r.url) for r in requests if r.method != "GET"] == []
