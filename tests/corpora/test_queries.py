"""A request's pair (corpora.queries.corpora.pair_resolve): found by its names in one statement, with the words of
a missing corpus or service, and whether the service ever ran on the corpus."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from config.errors import NotFound
from corpora.models import Corpus
from corpora.queries.corpora import Pair, pair_resolve
from services.models import Service
from tests.corpora.helpers import activated, imported

pytestmark = pytest.mark.django_db


def test_a_pair_is_resolved_by_one_statement_into_its_ids_and_names(corpus_root):
    imported(corpus_root, "a", documents=1)
    activated("a")
    with CaptureQueriesContext(connection) as captured:
        pair = pair_resolve("a", "tex_to_html")
    assert len(captured) == 1
    corpus, service = Corpus.objects.get(name="a"), Service.objects.get(name="tex_to_html")
    assert pair == Pair(corpus.pk, "a", service.pk, "tex_to_html", known=True)


def test_a_service_never_activated_on_the_corpus_is_resolved_but_not_known(corpus_root):
    imported(corpus_root, "a", documents=1)
    Service.objects.create(name="idle")
    assert pair_resolve("a", "idle").known is False
    assert pair_resolve("a", "import").known is False  # the import service has no activation or run


@pytest.mark.parametrize(
    ("corpus", "service", "detail"),
    [
        ("nope", "tex_to_html", "No corpus named 'nope'."),
        ("a", "nope", "No service named 'nope'."),
        ("nope", "nope", "No corpus named 'nope'."),  # the corpus is named first, as in a URL
    ],
)
def test_an_unknown_corpus_or_service_is_a_404_naming_it(corpus_root, corpus, service, detail):
    imported(corpus_root, "a", documents=1)
    with pytest.raises(NotFound) as raised:
        pair_resolve(corpus, service)
    assert raised.value.detail == detail


def test_names_are_matched_exactly(corpus_root):
    imported(corpus_root, "a", documents=1)
    with pytest.raises(NotFound):
        pair_resolve("A", "tex_to_html")
    with pytest.raises(NotFound):
        pair_resolve("a", "TEX_TO_HTML")
