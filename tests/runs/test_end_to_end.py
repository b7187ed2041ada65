"""Runs, diffs and the converter comparison through real conversions: a dispatcher and `manage.py worker`
processes (latexmlc in its bubblewrap sandbox) convert TeX files the test writes. Runs close by
themselves; the diff and the comparison show exactly the documents whose source the test changed."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from rest_framework.test import APIClient

from corpora.actions.corpora import corpus_import
from jobs.runner import job_run
from services.actions import service_register
from tests.corpora.helpers import activated
from tests.dispatcher.harness import DispatcherProcess, process_stop, wait_for, worker_process

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

CLEAN = "\\documentclass{article}\n\\begin{document}\nHello $x^2$.\n\\end{document}\n"
WARNING = "\\documentclass{article}\n\\begin{document}\nSee \\ref{sec:missing}.\n\\end{document}\n"
BROKEN = "\\documentclass{article}\n\\begin{document}\nAn \\undefinedmacro{} here.\n\\end{document}\n"
PROBLEM = "application/problem+json"
NEXT = "tex_to_html_next"


@pytest.fixture
def papers(corpus_root: Path) -> Path:
    """The corpus `papers`, imported from files written here: clean, warning and broken."""
    if not shutil.which("latexmlc"):
        pytest.fail("latexmlc is not installed: apt-get install latexml")
    directory = corpus_root / "papers"
    directory.mkdir()
    for name, text in (("clean", CLEAN), ("warning", WARNING), ("broken", BROKEN)):
        (directory / f"{name}.tex").write_text(text)
    job_run(corpus_import(name="papers", path=str(directory), actor="tester", send=False).pk)
    return directory


@pytest.fixture
def farm(tmp_path: Path, corpus_root: Path, process_tmpdir: Path) -> Iterator[Callable[..., None]]:
    """Start a dispatcher and one real worker per service named (the sandbox is bubblewrap, whatever the
    environment says); all stop at the end of the test."""
    started: list[Any] = []

    def start(*services: str) -> None:
        dispatcher = DispatcherProcess(
            RESULTS_DIR=str(tmp_path / "results"), CORPUS_ROOTS=str(corpus_root), CONVERSION_SANDBOX="bwrap"
        ).start()
        started.append(dispatcher)
        for service in services:
            started.append(worker_process(dispatcher, scratch=process_tmpdir / service, service=service))

    yield start
    for process in reversed(started):  # the workers, then their dispatcher
        if isinstance(process, DispatcherProcess):
            process.kill()
        else:
            process_stop(process)


def _closed(api: APIClient, pair: str, run_id: int) -> dict[str, Any]:
    """Wait until the run closes by itself (the pair has nothing left to convert); its record."""

    def record() -> dict[str, Any] | None:
        return next((run for run in api.get(pair).json() if run["id"] == run_id and not run["open"]), None)

    return wait_for(record, timeout=240, interval=0.2, message=f"run {run_id} of {pair} to close")


def _problem(response: Any, status: int, field: str | None = None) -> dict[str, Any]:
    assert response.status_code == status, response.content
    assert response["Content-Type"] == PROBLEM
    body = response.json()
    assert body["status"] == status and body["detail"]
    if field is not None:
        assert field in body["errors"], body
    return body


def _changes(rows: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
    return [(row["document"], row["previous_status"], row["current_status"]) for row in rows]


def test_a_run_closes_by_itself_and_a_rerun_with_a_fixed_document_shows_that_one_transition(
    authed, papers, farm
) -> None:
    pair = "/api/runs/papers/tex_to_html"
    activated("papers")
    opened = authed.get(f"{pair}/current").json()
    assert opened["open"] and opened["tallies"]["todo"] == 3 and opened["owner"] == "tester"
    farm("tex_to_html")

    first = _closed(authed, pair, opened["id"])
    overview = authed.get("/api/reports/papers/tex_to_html").json()
    assert first["tallies"] == overview["counts"] and not overview["run_in_progress"]
    assert {k: first["tallies"][k] for k in ("total", "no_problem", "warning", "error", "todo", "queued")} == {
        "total": 3, "no_problem": 1, "warning": 1, "error": 1, "todo": 0, "queued": 0,
    }  # fmt: skip
    assert first["snapshot_at"] and first["finished_at"] and first["duration_seconds"] > 0
    assert authed.get(f"{pair}/current").json() is None
    one_snapshot = authed.get(f"{pair}/diff").json()
    assert one_snapshot["available_dates"] == [first["snapshot_at"]] and one_snapshot["matrix"] == []

    (papers / "broken.tex").write_text(CLEAN)  # fixed on disk: converts clean from now on
    rerun = authed.post("/api/reports/papers/tex_to_html/rerun?severity=error")
    assert rerun.status_code == 202 and rerun.json()["tasks"] == 1
    second = _closed(authed, pair, rerun.json()["run_id"])
    overview = authed.get("/api/reports/papers/tex_to_html").json()
    assert second["tallies"] == overview["counts"]
    assert (second["tallies"]["no_problem"], second["tallies"]["warning"], second["tallies"]["error"]) == (2, 1, 0)
    assert [run["id"] for run in authed.get(pair).json()] == [second["id"], first["id"]]
    assert authed.get(f"{pair}/current").json() is None

    diff = authed.get(f"{pair}/diff").json()
    assert diff["available_dates"] == [second["snapshot_at"], first["snapshot_at"]]
    assert (diff["previous"], diff["current"]) == (first["snapshot_at"], second["snapshot_at"])
    cells = {(cell["previous"], cell["current"]): cell["count"] for cell in diff["matrix"]}
    assert cells == {("no_problem", "no_problem"): 1, ("warning", "warning"): 1, ("error", "no_problem"): 1}
    assert (diff["total"], diff["changed"], diff["regressions"]) == (3, 1, 0)
    dated = {"previous": first["snapshot_at"], "current": second["snapshot_at"]}
    assert authed.get(f"{pair}/diff", dated).json()["matrix"] == diff["matrix"]

    tasks = authed.get(f"{pair}/tasks").json()
    assert _changes(tasks) == [("broken", "error", "no_problem")] and not tasks[0]["regression"]
    report = authed.get(tasks[0]["report"])
    assert report.status_code == 200 and report.json()["status"] == "no_problem"
    assert authed.get(f"{pair}/tasks", dated).json() == tasks
    assert authed.get(f"{pair}/tasks?previous_status=error&current_status=no_problem").json() == tasks
    assert authed.get(f"{pair}/tasks?current_status=no_problem").json() == tasks
    for other in ("previous_status=warning", "previous_status=no_problem&current_status=error", "change=regressed"):
        assert authed.get(f"{pair}/tasks?{other}").json() == [], other

    _classes_and_history(authed, pair, first, second)
    _malformed_and_unknown(authed, pair, first["snapshot_at"])


def _classes_and_history(api: APIClient, pair: str, first: dict[str, Any], second: dict[str, Any]) -> None:
    """The fixed document's error class vanished between the two runs' snapshots, lost by exactly that
    document; its history shows both statuses, the class in the first snapshot only."""
    undefined = ("error", "undefined", "\\undefinedmacro")
    changes = api.get(f"{pair}/classes").json()
    assert {(c["severity"], c["category"], c["what"]): (c["kind"], c["change"]) for c in changes}[undefined] == (
        "vanished",
        -1,
    )
    assert all(c["kind"] in ("vanished", "shrank") for c in changes)  # nothing new came with the fix
    fixed = api.get(f"{pair}/classes", {"kind": "decreased", "severity": "error,fatal"}).json()
    assert [(c["severity"], c["category"], c["what"]) for c in fixed] == [undefined]
    tasks = f"{pair}/classes/error/undefined/{quote(undefined[2], safe='')}/tasks"
    lost = api.get(tasks, {"change": "lost"}).json()
    assert [row["document"] for row in lost] == ["broken"]
    assert api.get(tasks, {"change": "gained"}).json() == []
    for document in ("clean", "warning"):  # the documents the rerun left alone lost and gained nothing
        history = api.get(f"/api/corpus/papers/tex_to_html/document/{document}/history").json()
        assert len({e["status"] for e in history["entries"]}) == 1, history
    history = api.get("/api/corpus/papers/tex_to_html/document/broken/history").json()
    assert [(e["taken_at"], e["status"], e["run"]["id"]) for e in history["entries"]] == [
        (second["snapshot_at"], "no_problem", second["id"]),
        (first["snapshot_at"], "error", first["id"]),
    ]
    column = [(c["severity"], c["category"], c["what"]) for c in history["classes"]].index(undefined)
    assert [e["classes"][column] for e in history["entries"]] == [False, True]


def _malformed_and_unknown(api: APIClient, pair: str, snapshot_at: str) -> None:
    """400 with the field named for malformed dates and statuses; 404 for an unknown pair or a date at
    which no snapshot was taken."""
    for endpoint in ("diff", "tasks"):
        for field in ("previous", "current"):
            for value in ("yesterday", "2024-13-45T00:00:00Z"):
                _problem(api.get(f"{pair}/{endpoint}", {field: value}), 400, field)
    for field in ("previous_status", "current_status"):
        _problem(api.get(f"{pair}/tasks", {field: "great"}), 400, field)
    _problem(api.get(f"{pair}/tasks", {"change": "improved"}), 400, "change")
    not_taken = (datetime.fromisoformat(snapshot_at) + timedelta(microseconds=1)).isoformat()
    for endpoint in ("diff", "tasks"):
        for field in ("previous", "current"):
            _problem(api.get(f"{pair}/{endpoint}", {field: not_taken}), 404, field)
    service_register(name=NEXT, actor="tester")  # a service that never ran on the corpus
    for unknown in ("/api/runs/papers/nope", "/api/runs/nope/tex_to_html", f"/api/runs/papers/{NEXT}"):
        for endpoint in ("diff", "tasks"):
            _problem(api.get(f"{unknown}/{endpoint}"), 404)


def test_two_services_on_one_corpus_differ_exactly_on_the_document_changed_between_their_conversions(
    authed, papers, farm
) -> None:
    service_register(name=NEXT, actor="tester")
    run_id = activated("papers").result["run_id"]
    farm("tex_to_html", NEXT)
    _closed(authed, "/api/runs/papers/tex_to_html", run_id)

    (papers / "clean.tex").write_text(BROKEN)  # what NEXT converts differs from what tex_to_html converted
    _closed(authed, f"/api/runs/papers/{NEXT}", activated("papers", NEXT).result["run_id"])

    compare = f"/api/compare/papers/tex_to_html/{NEXT}"
    matrix = authed.get(compare).json()
    cells = {(cell["status_a"], cell["status_b"]): cell["count"] for cell in matrix["matrix"]}
    assert cells == {("no_problem", "error"): 1, ("warning", "warning"): 1, ("error", "error"): 1}
    assert (matrix["total"], matrix["differ"], matrix["regressions"]) == (3, 1, 1)
    for service, side in (("tex_to_html", "status_a"), (NEXT, "status_b")):
        counts = authed.get(f"/api/reports/papers/{service}").json()["counts"]
        for status in ("no_problem", "warning", "error"):
            assert sum(c["count"] for c in matrix["matrix"] if c[side] == status) == counts[status], (service, status)

    tasks = authed.get(f"{compare}/tasks").json()
    assert [(t["document"], t["status_a"], t["status_b"], t["regression"]) for t in tasks] == [
        ("clean", "no_problem", "error", True)
    ]
    for link, status in (("report_a", "no_problem"), ("report_b", "error")):
        report = authed.get(tasks[0][link])
        assert report.status_code == 200 and report.json()["status"] == status
    assert authed.get(f"{compare}/tasks?status_a=no_problem&status_b=error").json() == tasks
    assert authed.get(f"{compare}/tasks?change=regressed").json() == tasks
    for other in ("status_a=error", "status_b=warning", "status_a=warning&status_b=error"):
        assert authed.get(f"{compare}/tasks?{other}").json() == [], other
    back = authed.get(f"/api/compare/papers/{NEXT}/tex_to_html/tasks").json()
    assert [(t["document"], t["status_a"], t["status_b"], t["regression"]) for t in back] == [
        ("clean", "error", "no_problem", False)
    ]

    for field in ("status_a", "status_b"):
        _problem(authed.get(f"{compare}/tasks", {field: "great"}), 400, field)
    _problem(authed.get("/api/compare/papers/tex_to_html/tex_to_html"), 400, "service_b")
    service_register(name="tex_to_html_idle", actor="tester")  # registered, never activated here
    for unknown in (f"nope/tex_to_html/{NEXT}", "papers/tex_to_html/nope", "papers/tex_to_html_idle/tex_to_html"):
        for endpoint in ("", "/tasks"):
            _problem(authed.get(f"/api/compare/{unknown}{endpoint}"), 404)
