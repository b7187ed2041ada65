"""A run diff's status matrix with and without the infrastructure failures: a snapshot records the documents
whose task ended as one, and the matrix, its task lists, the diff screen and their API twins can leave
them out."""

from __future__ import annotations

import importlib
from typing import Any

import pytest
from django.db import connection

from conversion.choices import TaskStatus
from corpora.actions.reports import rerun
from corpora.models import Snapshot, SnapshotDiff
from corpora.pairs import snapshot_take
from tests.corpora.helpers import activated, imported
from tests.runs.helpers import classes_write, pair_close, pair_tasks

pytestmark = pytest.mark.django_db

PAIR = "/api/runs/a/tex_to_html"
SCREEN = "/runs/a/tex_to_html"
WORKER_DIED = ("fatal", "infrastructure", "worker_died")
NEVER_COMPLETED = ("fatal", "cortex", "never_completed_with_retries")  # CorTeX's own name for one
IO_FATAL = ("fatal", "I/O", "a/b.tex")  # the converter's own fatal
MISSING = ("warning", "missing_file", "x.sty")


def _transitions(diff: dict[str, Any]) -> dict[tuple[str, str], int]:
    return {(cell["previous"], cell["current"]): cell["count"] for cell in diff["matrix"]}


def _snapshot() -> None:
    task = pair_tasks()[0]
    snapshot_take(corpus_id=task.corpus_id, service_id=task.service_id)


@pytest.fixture
def moved(corpus_root) -> None:
    """doc0..doc3 without problems in the first snapshot; in the second doc0 is an infrastructure failure
    (worker_died), doc1 a converter fatal, doc2 and doc3 as they were."""
    imported(corpus_root, "a", documents=4)
    activated("a")
    classes_write([set(), set(), set(), set()])
    pair_close()
    classes_write([{WORKER_DIED}, {IO_FATAL}, set(), set()])
    _snapshot()


def test_a_snapshot_records_the_documents_whose_task_is_an_infrastructure_failure(corpus_root):
    imported(corpus_root, "a", documents=5)
    activated("a")
    classes_write([{WORKER_DIED, MISSING}, {IO_FATAL}, {NEVER_COMPLETED}, {MISSING}, set()])
    pair_close()
    documents = [task.document_id for task in pair_tasks()]
    snapshot = Snapshot.objects.get()
    assert snapshot.infrastructure_document_ids == [documents[0], documents[2]]
    # A rerun retires the messages of the tasks it sends back: a snapshot then no longer counts them.
    rerun(corpus_name="a", service_name="tex_to_html", actor="tester", severity="fatal")
    _snapshot()
    assert Snapshot.objects.order_by("-taken_at").first().infrastructure_document_ids == []
    classes_write([{MISSING}, {IO_FATAL}, {WORKER_DIED}, {MISSING}, set()])
    pair_close()
    assert Snapshot.objects.order_by("-taken_at").first().infrastructure_document_ids == [documents[2]]


def test_the_matrix_leaves_out_the_infrastructure_failures_on_request_and_counts_them(authed, moved):
    everything = authed.get(f"{PAIR}/diff").json()
    assert _transitions(everything) == {("no_problem", "no_problem"): 2, ("no_problem", "fatal"): 2}
    assert (everything["total"], everything["changed"], everything["regressions"]) == (4, 2, 2)
    assert (everything["exclude_infrastructure"], everything["infrastructure"]) == (False, 1)

    without = authed.get(f"{PAIR}/diff", {"exclude_infrastructure": "true"}).json()
    assert _transitions(without) == {("no_problem", "no_problem"): 2, ("no_problem", "fatal"): 1}
    assert (without["total"], without["changed"], without["regressions"]) == (3, 1, 1)
    assert (without["exclude_infrastructure"], without["infrastructure"]) == (True, 1)
    assert without["available_dates"] == everything["available_dates"]
    # One diff, computed once: the infrastructure failures' transitions are kept beside the matrix.
    diff = SnapshotDiff.objects.get()
    assert diff.infrastructure_matrix == [[TaskStatus.NO_PROBLEM, TaskStatus.FATAL, 1]] and diff.changed == 2

    changed = authed.get(f"{PAIR}/tasks").json()
    assert [t["document"] for t in changed] == ["doc0", "doc1"]
    real = authed.get(f"{PAIR}/tasks", {"exclude_infrastructure": "true"}).json()
    assert [(t["document"], t["previous_status"], t["current_status"]) for t in real] == [
        ("doc1", "no_problem", "fatal")
    ]
    one_page = {"exclude_infrastructure": "true", "page_size": 1, "offset": 1}
    assert authed.get(f"{PAIR}/tasks", one_page).json() == []
    assert authed.get(f"{PAIR}/diff", {"exclude_infrastructure": "maybe"}).status_code == 400


def test_an_infrastructure_failure_in_the_older_snapshot_is_left_out_too(authed, moved):
    """doc0 was an infrastructure failure in the second snapshot and is converted in the third: the diff of
    the two is without it on request, as is the diff of the first and the third (where it is none)."""
    classes_write([{MISSING}, {IO_FATAL}, set(), set()])
    _snapshot()
    dates = authed.get(f"{PAIR}/diff").json()["available_dates"]
    later = {"previous": dates[1], "current": dates[0]}
    assert _transitions(authed.get(f"{PAIR}/diff", later).json())[("fatal", "warning")] == 1
    without = authed.get(f"{PAIR}/diff", {**later, "exclude_infrastructure": "true"}).json()
    assert _transitions(without) == {("no_problem", "no_problem"): 2, ("fatal", "fatal"): 1}
    assert without["infrastructure"] == 1
    apart = {"previous": dates[2], "current": dates[0], "exclude_infrastructure": "true"}
    assert authed.get(f"{PAIR}/diff", apart).json()["infrastructure"] == 0


def test_the_diff_screen_has_the_checkbox_and_shows_the_matrix_without_them(client, authed, moved):
    screen = client.get(f"{SCREEN}/diff", {"exclude_infrastructure": "true"})
    assert screen.status_code == 200
    assert (
        screen.context["diff"]["matrix"]
        == authed.get(f"{PAIR}/diff", {"exclude_infrastructure": "true"}).json()["matrix"]
    )
    body = screen.content.decode()
    assert 'name="exclude_infrastructure" value="true" checked' in body
    assert 'data-row="no_problem" data-column="fatal" data-count="1"' in body
    assert '<dd data-stat="changed"><a href="' in body and 'data-stat="infrastructure"' in body
    # The cells lead to their documents without the infrastructure failures too.
    cell = body.split('data-row="no_problem" data-column="fatal"')[1].split("</td>")[0]
    link = cell.split('href="')[1].split('"')[0].replace("&amp;", "&")
    assert "exclude_infrastructure=true" in link
    listed = client.get(link)
    assert [row["task"]["document"] for row in listed.context["rows"]] == ["doc1"] and listed.context["count"] == 1

    everything = client.get(f"{SCREEN}/diff").content.decode()
    assert 'data-row="no_problem" data-column="fatal" data-count="2"' in everything
    assert 'name="exclude_infrastructure" value="true">' in everything


def test_the_migration_fills_the_snapshots_and_diffs_taken_before_from_the_members(authed, moved):
    """Corpora migration 0018 reads the infrastructure failures of the snapshots that froze their classes
    from their members, and the transitions of those documents of the diffs already computed."""
    migration = importlib.import_module("corpora.migrations.0018_snapshot_infrastructure_documents")
    authed.get(f"{PAIR}/diff")
    recorded = list(Snapshot.objects.order_by("id").values_list("infrastructure_document_ids", flat=True))
    matrix = SnapshotDiff.objects.get().infrastructure_matrix
    assert recorded[1] and matrix
    Snapshot.objects.update(infrastructure_document_ids=[])
    SnapshotDiff.objects.update(infrastructure_matrix=[])
    with connection.cursor() as cursor:
        cursor.execute(migration.SNAPSHOTS_FILL)
        cursor.execute(migration.DIFFS_FILL)
    assert list(Snapshot.objects.order_by("id").values_list("infrastructure_document_ids", flat=True)) == recorded
    assert SnapshotDiff.objects.get().infrastructure_matrix == matrix
