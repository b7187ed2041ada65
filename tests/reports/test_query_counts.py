"""The statements each report and document page runs, pinned as NetBox pins its query counts: a second
lookup of the pair, or a statement per row, fails here. Each page is read once first, so the slice it
needs is built and the count is that of every later read; screens and their API twins alike."""

from __future__ import annotations

from urllib.parse import quote

import pytest

from tests.query_counts import config_synced, statements  # noqa: F401 (config_synced: the fixture)
from tests.reports.test_views import converted  # noqa: F401 (the fixture: documents with HTML)

pytestmark = pytest.mark.django_db

ENTRIES = f"error/undefined/{quote(chr(92) + 'foo')}"
DOCUMENT = "c/tex_to_html/document/x%20y%25z"
# (path, statements): the pair is found by one of them (corpora.queries.corpora.pair_resolve).
PAGES = [
    ("/reports/c/tex_to_html", 5),  # one of them counts the infrastructure fatals apart
    ("/api/reports/c/tex_to_html", 4),
    ("/reports/c/tex_to_html/error", 6),
    ("/api/reports/c/tex_to_html/error", 6),
    ("/reports/c/tex_to_html/error/undefined", 6),
    ("/api/reports/c/tex_to_html/error/undefined", 6),
    (f"/reports/c/tex_to_html/{ENTRIES}", 12),
    (f"/api/reports/c/tex_to_html/{ENTRIES}", 12),
    (f"/corpus/{DOCUMENT}", 4),
    (f"/api/corpus/{DOCUMENT}", 4),
    (f"/corpus/{DOCUMENT}/read", 4),
    (f"/corpus/{DOCUMENT}/files/doc.html", 2),
    (f"/api/corpus/{DOCUMENT}/files/doc.html", 2),
    ("/corpora/c/services/tex_to_html/documents", 6),
    ("/api/corpora/c/services/tex_to_html/documents", 6),
]


@pytest.mark.parametrize(("path", "expected"), PAGES)
def test_a_report_or_document_page_runs_a_pinned_number_of_statements(client, converted, path, expected):  # noqa: F811
    sql = statements(client, path)
    assert len(sql) == expected, "\n".join(sql)


@pytest.mark.parametrize("path", [path for path, _ in PAGES])
def test_a_report_or_document_page_resolves_its_pair_once(client, converted, path):  # noqa: F811
    sql = statements(client, path)
    assert sum("AS p(corpus, service)" in text for text in sql) == 1, "\n".join(sql)
    # A document is found by its name, in a statement that may join its corpus (for the corpus's path).
    by_name = [
        text
        for text in sql
        if '"name" =' in text.replace('"corpora_document"."name" =', "")
        and ('"corpora_corpus"' in text or '"services_service"' in text)
    ]
    assert by_name == [], "\n".join(by_name)
