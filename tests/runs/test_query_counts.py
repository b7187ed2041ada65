"""The statements each run page runs, pinned as NetBox pins its query counts: a second lookup of the pair,
or a statement per run or per row, fails here. Each page is read once first, so the diff it shows is made
and the count is that of every later read; screens and their API twins alike."""

from __future__ import annotations

import pytest

from tests.query_counts import config_synced, statements  # noqa: F401 (config_synced: the fixture)
from tests.runs.helpers import two_runs

pytestmark = pytest.mark.django_db

PAIR = "runs/a/tex_to_html"
HISTORY = "corpus/a/tex_to_html/document/doc0/history"
# (path, statements): the pair is found by one of them (corpora.queries.corpora.pair_resolve).
PAGES = [
    (f"/{PAIR}", 29),
    (f"/api/{PAIR}", 2),
    (f"/api/{PAIR}/current", 2),
    (f"/api/{PAIR}/telemetry", 4),
    (f"/api/{PAIR}/cost", 6),
    (f"/{PAIR}/diff", 10),
    (f"/api/{PAIR}/diff", 6),
    (f"/{PAIR}/tasks", 16),
    (f"/api/{PAIR}/tasks", 11),
    (f"/{PAIR}/classes", 6),
    (f"/api/{PAIR}/classes", 4),
    (f"/{HISTORY}", 7),
    (f"/api/{HISTORY}", 7),
]


@pytest.fixture
def history(corpus_root) -> None:
    two_runs(corpus_root)


@pytest.mark.parametrize(("path", "expected"), PAGES)
def test_a_run_page_runs_a_pinned_number_of_statements(client, history, path, expected):
    sql = statements(client, path)
    assert len(sql) == expected, "\n".join(sql)


@pytest.mark.parametrize("path", [path for path, _ in PAGES])
def test_a_run_page_resolves_its_pair_once(client, history, path):
    sql = statements(client, path)
    assert sum("AS p(corpus, service)" in text for text in sql) == 1, "\n".join(sql)
    by_name = [
        text for text in sql if '"name" =' in text and ('"corpora_corpus"' in text or '"services_service"' in text)
    ]
    assert by_name == [], "\n".join(by_name)
