"""Source context on the document report: the lines of the document's own source around each located
message, the same on the screen (escaped) and in the API twin (plain text), for a directory entry and an
archive, none for a file that is not the document's, and no extra statement for it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from corpora.actions.corpora import corpus_import
from corpora.models import Task
from dispatcher.ingest import RawResult, result_ingest
from jobs.runner import job_run
from tests.corpora.helpers import activated
from tests.dispatcher.harness import result_zip
from tests.query_counts import config_synced, statements  # noqa: F401 (config_synced: the fixture)
from tests.support import write_targz, write_tex

pytestmark = pytest.mark.django_db

MAIN = "\\documentclass{article}\n\\begin{document}\n\\input{sec/body}\n\\end{document}\n"
# Line 7 holds markup; \foo is at column 32 (the characters before it).
SCRIPT_LINE = "A <script>alert('x')</script> & \\foo here"
BODY = "".join(f"{SCRIPT_LINE if n == 7 else f'body line {n}'}\n" for n in range(1, 12))
LOG = (
    "(Loading /usr/share/perl5/LaTeXML/Package/article.cls.ltxml...\n"
    "Error:undefined:\\foo The control sequence \\foo is undefined.\n\tat body.tex; line 7 col 32\n"
    "Warning:missing_file:pbox Can't find binding for package pbox\n"
    "\tat main.tex; line 2 col 11 - line 2 col 11\n"
    "Error:unexpected:\\relax In a package\n\tat amsmath.sty; line 300 col 2\n"
    "Error:unexpected:\\x Climbing out\n\tat ../../etc/passwd; line 1\n"
    "Error:malformed:x Beyond its end\n\tat body.tex; line 99 col 1\n"
    "Warning:not_parsed:UNKNOWN>METARELOP MathParser failed to match rule 'Anything'\n"
    "\tat body.tex; line 3 col 5 - line 3 col 9\n"
    "Status:conversion:2\nInfo:runtime_ms:120\n"
)


@pytest.fixture
def located(corpus_root: Path, tmp_path: Path, settings) -> list[str]:
    """Corpus s: a directory entry and a .tar.gz of the same paper, both converted with LOG."""
    settings.RESULTS_DIR = tmp_path / "results"
    directory = corpus_root / "s"
    write_tex(directory / "paperdir" / "main.tex", MAIN)
    write_tex(directory / "paperdir" / "sec" / "body.tex", BODY)
    write_targz(directory / "papertar.tar.gz", {"main.tex": MAIN, "sec/body.tex": BODY})
    job_run(corpus_import(name="s", path=str(directory), actor="tester", send=False).pk)
    activated("s")
    tasks = list(Task.objects.filter(corpus__name="s", service__name="tex_to_html").order_by("pk"))
    Task.objects.filter(pk__in=[t.pk for t in tasks]).update(status=77)
    batch = [RawResult("w", "tex_to_html", str(t.pk), result_zip(LOG)) for t in tasks]
    result_ingest(batch, service_ids={"tex_to_html": tasks[0].service_id}, results_dir=settings.RESULTS_DIR,
                  max_bytes=10**7)  # fmt: skip
    return ["paperdir", "papertar"]


@pytest.mark.parametrize("name", ["paperdir", "papertar"])
def test_a_located_message_shows_its_lines_escaped_on_the_screen_and_plain_in_the_api(client, api, located, name):
    path = f"/corpus/s/tex_to_html/document/{name}"
    document = api.get(f"/api{path}").json()
    screen = client.get(path)
    assert json.loads(json.dumps(screen.context["document"])) == document
    by_what = {m["what"]: m["context"] for m in document["messages"]}
    undefined = by_what["\\foo"]
    assert (undefined["file"], undefined["line"], undefined["column"]) == ("sec/body.tex", 7, 32)
    assert [(line["number"], line["text"], line["marked"]) for line in undefined["lines"]] == [
        (5, "body line 5", False), (6, "body line 6", False), (7, SCRIPT_LINE, True),
        (8, "body line 8", False), (9, "body line 9", False),
    ]  # fmt: skip
    assert [line["number"] for line in by_what["pbox"]["lines"]] == [1, 2, 3, 4]
    # A package's file, a path climbing out and a line past the file's end: no context.
    assert by_what["\\relax"] is None and by_what["\\x"] is None and by_what["x"] is None

    body = screen.content.decode()
    assert "<script>alert" not in body
    assert (
        '<span class="source-line marked" data-line="7"><span class="line-number">7</span>'
        "A &lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt; &amp; "
        '<mark class="source-column">\\</mark>foo here</span>'
    ) in body
    # A range within one line is marked from its column to its end column.
    assert '<span class="line-number">3</span>body <mark class="source-column">line</mark> 3</span>' in body


def test_source_context_costs_the_document_page_no_statement(client, located):
    for path in ("/corpus/s/tex_to_html/document/papertar", "/api/corpus/s/tex_to_html/document/papertar"):
        # The same four as a document without located messages (tests/reports/test_query_counts.py).
        assert len(statements(client, path)) == 4, path
