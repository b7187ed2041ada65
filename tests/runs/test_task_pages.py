"""Pages of a diff's task list: every filter and every offset gives the rows, in the order, that sorting
the whole list gives (the pages are read by transition from the diff's matrix)."""

from __future__ import annotations

import pytest

from corpora.models import Task
from corpora.statuses import DIFF_BUCKETS, regressed
from tests.corpora.helpers import activated, imported

pytestmark = pytest.mark.django_db

PAIR = "/api/runs/a/tex_to_html"
SNAPSHOT = "/api/corpora/a/services/tex_to_html/snapshot"
# Statuses of the 12 documents (doc0 .. doc11, in document order) in the two snapshots.
BEFORE = [-1, -1, -1, -1, -2, -2, -2, -3, -3, -4, -5, -1]
AFTER = [-2, -3, -2, -1, -3, -2, -4, -4, -1, -5, -1, -2]


def _set(statuses: list[int]) -> None:
    tasks = Task.objects.filter(corpus__name="a", service__name="tex_to_html").order_by("document_id")
    for task, status in zip(tasks, statuses, strict=True):
        Task.objects.filter(pk=task.pk).update(status=status)


def _rows(authed, **query) -> list[tuple[str, str, str]]:
    rows, offset = [], 0
    while True:
        page = authed.get(f"{PAIR}/tasks", {**query, "offset": offset, "page_size": 2})
        assert page.status_code == 200
        body = page.json()
        rows.extend((r["document"], r["previous_status"], r["current_status"]) for r in body)
        if len(body) < 2:
            return rows
        offset += 2


def test_every_page_of_every_filter_matches_the_sorted_list(authed, corpus_root):
    imported(corpus_root, "a", documents=12)
    activated("a")
    _set(BEFORE)
    assert authed.post(SNAPSHOT).status_code == 202
    _set(AFTER)
    assert authed.post(SNAPSHOT).status_code == 202
    names = sorted(Task.objects.filter(corpus__name="a", service__name="tex_to_html").values_list(
        "document_id", "document__name"))  # fmt: skip
    bucket_names = {bucket: name for name, bucket in DIFF_BUCKETS.items()}
    changed = [
        (p, c, document_id, name) for (document_id, name), p, c in zip(names, BEFORE, AFTER, strict=True) if p != c
    ]

    def expected(keep) -> list[tuple[str, str, str]]:
        chosen = sorted(row for row in changed if keep(bucket_names[row[0]], bucket_names[row[1]]))
        return [(name, bucket_names[p], bucket_names[c]) for p, c, _, name in chosen]

    assert _rows(authed) == expected(lambda p, c: True)
    assert len(_rows(authed)) == 10
    assert _rows(authed, previous_status="no_problem") == expected(lambda p, c: p == "no_problem")
    assert _rows(authed, current_status="no_problem") == expected(lambda p, c: c == "no_problem")
    assert _rows(authed, previous_status="no_problem", current_status="warning") == expected(
        lambda p, c: (p, c) == ("no_problem", "warning")
    )
    assert _rows(authed, change="regressed") == expected(regressed)
    assert _rows(authed, previous_status="fatal", change="regressed") == []
    assert authed.get(f"{PAIR}/tasks", {"offset": 10}).json() == []
