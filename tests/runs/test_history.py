"""Runs, snapshots and diffs through the API, on tasks whose statuses the test sets (no conversion)."""

from __future__ import annotations

import pytest

from corpora.models import Run, Snapshot, Task
from corpora.pairs import runs_close_drained
from tests.corpora.helpers import activated, imported

pytestmark = pytest.mark.django_db

PAIR = "/api/runs/a/tex_to_html"


def _finish(statuses: list[int]) -> None:
    tasks = Task.objects.filter(corpus__name="a", service__name="tex_to_html").order_by("document_id")
    for task, status in zip(tasks, statuses, strict=True):
        Task.objects.filter(pk=task.pk).update(status=status)
    task = tasks.first()
    runs_close_drained({(task.corpus_id, task.service_id)})


def test_a_run_closes_with_frozen_tallies_and_a_snapshot_and_the_diff_shows_the_change(authed, corpus_root):
    imported(corpus_root, "a", documents=4)
    activated("a")
    current = authed.get(f"{PAIR}/current").json()
    assert current["open"] and current["tallies"]["todo"] == 4 and current["owner"] == "tester"
    _finish([-1, -1, -2, -4])
    assert authed.get(f"{PAIR}/current").json() is None
    (run,) = authed.get(PAIR).json()
    assert run["tallies"]["no_problem"] == 2 and run["tallies"]["fatal"] == 1 and run["snapshot_at"]
    assert run["duration_seconds"] >= 0
    rerun = authed.post("/api/reports/a/tex_to_html/rerun?severity=fatal")
    assert rerun.status_code == 202
    _finish([-1, -1, -2, -2])
    runs = authed.get(PAIR).json()
    assert [r["tallies"]["warning"] for r in runs] == [2, 1]
    diff = authed.get(f"{PAIR}/diff").json()
    assert len(diff["available_dates"]) == 2 and diff["changed"] == 1
    cells = {(c["previous"], c["current"]): c["count"] for c in diff["matrix"]}
    assert cells == {("no_problem", "no_problem"): 2, ("warning", "warning"): 1, ("fatal", "warning"): 1}
    tasks = authed.get(f"{PAIR}/tasks").json()
    assert [(t["document"], t["previous_status"], t["current_status"]) for t in tasks] == [("doc3", "fatal", "warning")]
    assert authed.get(f"{PAIR}/tasks?previous_status=no_problem").json() == []
    assert authed.get(f"{PAIR}/tasks?previous=yesterday").status_code == 400
    assert authed.get(f"{PAIR}/tasks?previous_status=great").status_code == 400
    assert authed.get(f"{PAIR}/diff?previous=2001-01-01T00:00:00Z").status_code == 404
    older = diff["available_dates"][1]
    again = authed.get(f"{PAIR}/diff", {"previous": older, "current": diff["available_dates"][0]}).json()
    assert again["matrix"] == diff["matrix"]
    assert authed.get("/api/runs?limit=0").status_code == 400
    assert len(authed.get("/api/runs?corpus=a&limit=1").json()) == 1


def test_snapshot_appends_one_row_per_task_and_compare_shows_the_differing_documents(authed, corpus_root):
    imported(corpus_root, "a", documents=3)
    activated("a")
    activated("a", "tex_to_html_next")
    ack = authed.post("/api/corpora/a/services/tex_to_html/snapshot")
    assert ack.status_code == 202 and ack.json()["rows"] == 3
    assert authed.post("/api/corpora/a/services/nope/snapshot").status_code == 404
    Task.objects.filter(corpus__name="a", service__name="tex_to_html").update(status=-1)
    Task.objects.filter(corpus__name="a", service__name="tex_to_html_next", document__name="doc1").update(status=-3)
    Task.objects.filter(corpus__name="a", service__name="tex_to_html_next").exclude(document__name="doc1").update(
        status=-1
    )
    matrix = authed.get("/api/compare/a/tex_to_html/tex_to_html_next").json()
    assert matrix["differ"] == 1 and matrix["regressions"] == 1
    tasks = authed.get("/api/compare/a/tex_to_html/tex_to_html_next/tasks").json()
    assert [(t["document"], t["status_a"], t["status_b"]) for t in tasks] == [("doc1", "no_problem", "error")]
    assert authed.get("/api/compare/a/tex_to_html/tex_to_html").status_code == 400


def test_deleting_the_corpus_or_the_service_removes_their_history_and_deactivating_keeps_it(authed, corpus_root):
    from corpora.models import SnapshotDiff, TaskDiff

    imported(corpus_root, "a", documents=2)
    imported(corpus_root, "b", documents=2)
    activated("a")
    _finish([-1, -1])
    authed.post("/api/reports/a/tex_to_html/rerun")
    _finish([-1, -2])
    assert authed.get(f"{PAIR}/diff").json()["changed"] == 1
    assert Snapshot.objects.count() == 2 and not TaskDiff.objects.exists()  # the matrix alone
    assert len(authed.get(f"{PAIR}/tasks").json()) == 1
    assert TaskDiff.objects.count() == 1
    # Deactivating closes the open run, frozen with its snapshot, and keeps the history.
    activated("b")
    assert authed.delete("/api/corpora/b/services/tex_to_html?confirm=tex_to_html").status_code in (200, 204)
    b_runs = authed.get("/api/runs/b/tex_to_html").json()
    assert len(b_runs) == 1 and b_runs[0]["tallies"]["todo"] == 2 and b_runs[0]["snapshot_at"]
    assert authed.delete("/api/corpora/a?confirm=a").status_code in (200, 204)
    assert set(Run.objects.values_list("corpus__name", flat=True)) == {"b"}
    assert set(Snapshot.objects.values_list("corpus__name", flat=True)) == {"b"}
    assert not SnapshotDiff.objects.exists() and not TaskDiff.objects.exists()
    assert authed.delete("/api/services/tex_to_html?confirm=tex_to_html").status_code in (200, 204)
    assert not Run.objects.exists() and not Snapshot.objects.exists()


def test_an_extend_opens_a_run_and_the_diff_marks_the_new_document_absent_before(authed, corpus_root):
    from corpora.actions.corpora import corpus_extend
    from jobs.runner import job_run
    from tests.support import write_tex

    imported(corpus_root, "a", documents=2)
    activated("a")
    _finish([-1, -2])
    write_tex(corpus_root / "a" / "doc9.tex")
    job_run(corpus_extend(name="a", actor="extender", send=False).pk)
    current = authed.get(f"{PAIR}/current").json()
    assert current["owner"] == "extender" and current["tallies"]["todo"] == 1
    _finish([-1, -2, -1])
    diff = authed.get(f"{PAIR}/diff").json()
    cells = {(c["previous"], c["current"]): c["count"] for c in diff["matrix"]}
    assert cells == {("no_problem", "no_problem"): 1, ("warning", "warning"): 1, ("absent", "no_problem"): 1}
    tasks = authed.get(f"{PAIR}/tasks?previous_status=absent").json()
    assert [(t["document"], t["current_status"]) for t in tasks] == [("doc9", "no_problem")]


def test_a_paused_run_stays_open_until_its_blocked_tasks_are_done(authed, corpus_root):
    imported(corpus_root, "a", documents=2)
    activated("a")
    assert authed.post("/api/reports/a/tex_to_html/pause").json()["blocked"] == 2
    task = Task.objects.filter(corpus__name="a", service__name="tex_to_html").first()
    runs_close_drained({(task.corpus_id, task.service_id)})
    assert authed.get(f"{PAIR}/current").json()["tallies"]["blocked"] == 2
    authed.post("/api/reports/a/tex_to_html/resume")
    _finish([-1, -1])
    assert authed.get(f"{PAIR}/current").json() is None


def test_a_diffs_rows_emptied_by_a_crash_are_written_again_by_the_next_task_list(authed, corpus_root):
    from django.db import connection

    from corpora.models import SnapshotDiff, TaskDiff

    imported(corpus_root, "a", documents=3)
    activated("a")
    _finish([-1, -1, -1])
    authed.post("/api/reports/a/tex_to_html/rerun")
    _finish([-1, -3, -4])
    before = authed.get(f"{PAIR}/tasks").json()
    assert sorted(t["document"] for t in before) == ["doc1", "doc2"]
    assert SnapshotDiff.objects.get().rows_ready
    with connection.cursor() as cursor:  # what crash recovery does to an unlogged table
        cursor.execute("TRUNCATE corpora_taskdiff")
    assert authed.get(f"{PAIR}/tasks").json() == before
    assert TaskDiff.objects.count() == 2


def test_a_snapshot_taken_directly_is_journaled_as_from_the_api(corpus_root):
    from accounts.models import AuditEntry
    from config.errors import NotFound
    from corpora.actions.history import snapshot_append

    imported(corpus_root, "a", documents=2)
    activated("a")
    assert snapshot_append(corpus_name="a", service_name="tex_to_html", actor="shell").rows == 2
    with pytest.raises(NotFound):
        snapshot_append(corpus_name="a", service_name="nope", actor="shell")
    rows = AuditEntry.objects.filter(action="runs.snapshot").order_by("id")
    assert list(rows.values_list("actor", "target", "outcome")) == [
        ("shell", "a/tex_to_html", "ok"),
        ("shell", "a/nope", "404 Not found"),
    ]
