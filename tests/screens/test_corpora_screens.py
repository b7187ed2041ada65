"""The corpus screens in real headless Chromium (Debian's, driven by Playwright): sign in, watch a
corpus's status bars follow its tasks without reloading, then delete it through the typed confirmation; the
corpora list's counts per service, and a pair's documents with their runtimes and first errors."""

from __future__ import annotations

import pytest

from corpora.models import Corpus, Document, Task
from tests.corpora.helpers import activated, imported
from tests.corpora.test_documents import pair  # noqa: F401 (the fixture: documents converted and not)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


def _count(page, service: str, key: str) -> str:
    return page.inner_text(f"tr[data-service='{service}'] .legend [data-count='{key}']")


def test_an_operator_watches_a_corpus_convert_live_and_deletes_it(page, live_server, token, corpus_root, tmp_path):
    imported(corpus_root, "demo", documents=4)
    activated("demo", "tex_to_html")
    url = f"{live_server.url}/corpora/demo"

    page.goto(f"{live_server.url}/login?next=/corpora/demo")
    page.fill("#token", token)
    page.click("button[type=submit]")
    page.wait_for_url(url)
    assert page.inner_text("#corpus-state") == "ready"
    assert _count(page, "import", "no_problem") == "4"
    assert _count(page, "tex_to_html", "todo") == "4" and _count(page, "tex_to_html", "no_problem") == "0"

    # Workers report results: the page polls and the bars follow without a reload.
    tasks = list(Task.objects.filter(corpus__name="demo", service__name="tex_to_html").order_by("pk"))
    for task, status in zip(tasks, (-1, -1, -2, -3), strict=True):
        Task.objects.filter(pk=task.pk).update(status=status)
    page.wait_for_function(  # a function, not an expression: the screens' CSP forbids eval()
        "() => document.querySelector(\"tr[data-service='tex_to_html'] .legend [data-count='no_problem']\")"
        ".innerText === '2'",
        timeout=10000,
    )
    assert _count(page, "tex_to_html", "warning") == "1" and _count(page, "tex_to_html", "error") == "1"
    assert _count(page, "tex_to_html", "todo") == "0"
    assert page.locator("tr[data-service='tex_to_html'] .statusbar .seg").count() == 3
    page.screenshot(path=tmp_path / "corpus-screen.png", full_page=True)

    page.click("text=Delete corpus…")
    page.wait_for_url(f"{url}/delete")
    page.fill("#confirm", "dem")
    page.click("#confirm-delete button[type=submit]")
    assert "confirm=demo" in page.inner_text("[role=alert]")
    assert Corpus.objects.filter(name="demo").exists()

    page.fill("#confirm", "demo")
    page.click("#confirm-delete button[type=submit]")
    page.wait_for_url(f"{live_server.url}/corpora")
    assert "The corpus demo was deleted" in page.inner_text("ul.messages")
    assert not Corpus.objects.filter(name="demo").exists() and not Document.objects.exists()


def test_the_corpora_list_shows_each_services_counts_and_the_documents_their_runtime_and_first_error(
    page,
    live_server,
    token,
    api,
    pair,  # noqa: F811
):
    page.goto(f"{live_server.url}/login?next=/corpora")
    page.fill("#token", token)
    page.click("button[type=submit]")
    page.wait_for_url(f"{live_server.url}/corpora")

    listed = next(c for c in api.get("/api/corpora").json() if c["name"] == "c")
    (counts,) = [s["counts"] for s in listed["service_counts"] if s["name"] == "tex_to_html"]
    cell = page.locator("tr[data-corpus='c'] .service-counts[data-service='tex_to_html']")
    shown = {key: int(cell.locator(f"[data-count='{key}']").inner_text())
             for key in ("no_problem", "warning", "error", "fatal", "in_progress")}  # fmt: skip
    assert shown == {key: counts[key] for key in shown} == {
        "no_problem": 1, "warning": 1, "error": 1, "fatal": 1, "in_progress": 2,
    }  # fmt: skip

    page.goto(f"{live_server.url}/corpora/c/services/tex_to_html/documents")

    def row(name: str, field: str) -> str:
        return page.locator(f"#documents tr[data-document='{name}'] [data-field='{field}']").inner_text()

    assert [row(name, "runtime") for name in ("al_pha", "alpha", "Beta", "delta")] == [
        "2 min 23 s", "1 h 4 min", "850 ms", "—",
    ]  # fmt: skip
    assert row("al_pha", "problem") == "undefined:\\foo" and row("a%b", "problem") == "missing_file:x.sty"
    assert row("alpha", "problem") == row("Beta", "problem") == "—"
