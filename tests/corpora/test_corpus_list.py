"""The corpora list (GET /api/corpora and its screen): each corpus's activated services with their
per-status counts, read from the trigger-kept counts in one statement for the whole list."""

from __future__ import annotations

import json

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from conversion.choices import TaskStatus
from corpora.models import Task, TaskCount
from tests.corpora.helpers import activated, imported

pytestmark = pytest.mark.django_db


def _listed(api, name: str) -> dict:
    return next(corpus for corpus in api.get("/api/corpora").json() if corpus["name"] == name)


def test_each_activated_service_is_listed_with_the_counts_of_the_corpus_page(api, corpus_root):
    imported(corpus_root, "a", documents=3)
    activated("a", "tex_to_html")
    activated("a", "other")
    imported(corpus_root, "b", documents=2)
    first = Task.objects.filter(corpus__name="a", service__name="tex_to_html").order_by("pk").first()
    Task.objects.filter(pk=first.pk).update(status=TaskStatus.ERROR)

    listed = _listed(api, "a")
    assert [s["name"] for s in listed["service_counts"]] == listed["services"] == ["other", "tex_to_html"]
    detail = {s["name"]: s["counts"] for s in api.get("/api/corpora/a").json()["services"]}
    assert {s["name"]: s["counts"] for s in listed["service_counts"]} == {
        name: detail[name] for name in ("other", "tex_to_html")
    }
    counts = listed["service_counts"][1]["counts"]
    assert (counts["error"], counts["in_progress"], counts["total"]) == (1, 2, 3)
    assert _listed(api, "b")["service_counts"] == []  # the import service is no activated one


def test_the_counts_are_the_trigger_kept_counts_not_a_count_of_tasks(api, corpus_root):
    imported(corpus_root, "a", documents=2)
    activated("a", "tex_to_html")
    pair = TaskCount.objects.filter(corpus__name="a", service__name="tex_to_html")
    pair.create(corpus_id=pair.first().corpus_id, service_id=pair.first().service_id, bucket=TaskStatus.FATAL,
                count=1_000_000)  # fmt: skip

    (listed,) = _listed(api, "a")["service_counts"]
    assert listed["counts"]["fatal"] == 1_000_000


def test_the_list_costs_the_same_statements_however_many_corpora_and_services(client, api, corpus_root):
    def statements() -> int:
        api.get("/api/corpora")
        with CaptureQueriesContext(connection) as captured:
            assert api.get("/api/corpora").status_code == 200 and client.get("/corpora").status_code == 200
        return len(captured)

    imported(corpus_root, "a", documents=1)
    activated("a", "tex_to_html")
    one = statements()
    for name in ("b", "c"):
        imported(corpus_root, name, documents=2)
        activated(name, "tex_to_html")
        activated(name, "other")
    assert statements() == one


def test_the_screen_renders_the_same_dto_as_the_api(client, api, corpus_root):
    imported(corpus_root, "a", documents=2)
    activated("a", "tex_to_html")
    screen = client.get("/corpora")
    assert json.loads(json.dumps(screen.context["corpora"])) == api.get("/api/corpora").json()
