"""A sandbox converts and reports on its own through real conversions: a dispatcher and a `manage.py worker`
(latexmlc in its bubblewrap sandbox) convert the parent, then the sandbox carved from its errors, which
reads the parent's entries in place; the parent's tasks, messages and result files stay as they were."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from rest_framework.test import APIClient

from corpora.actions.corpora import corpus_import, corpus_sandbox
from corpora.models import Corpus, LogMessage, Task
from jobs.models import Job
from jobs.runner import job_run
from tests.corpora.helpers import activated
from tests.dispatcher.harness import DispatcherProcess, process_stop, wait_for, worker_process

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

CLEAN = "\\documentclass{article}\n\\begin{document}\nHello $x^2$.\n\\end{document}\n"
WARNING = "\\documentclass{article}\n\\begin{document}\nSee \\ref{sec:missing}.\n\\end{document}\n"
BROKEN = "\\documentclass{article}\n\\begin{document}\nAn \\undefinedmacro{} here.\n\\end{document}\n"
BROKEN_TOO = "\\documentclass{article}\n\\begin{document}\nAn \\othermacro{} there.\n\\end{document}\n"
BROKEN_TWICE = "\\documentclass{article}\n\\begin{document}\nAn \\undefinedmacro{} again.\n\\end{document}\n"


@pytest.fixture
def farm(tmp_path: Path, corpus_root: Path, settings, process_tmpdir: Path) -> Iterator[None]:
    """The corpus `papers` (clean, warning and three broken), a dispatcher and one real worker."""
    if not shutil.which("latexmlc"):
        pytest.fail("latexmlc is not installed: apt-get install latexml")
    settings.RESULTS_DIR = tmp_path / "results"
    directory = corpus_root / "papers"
    directory.mkdir()
    texts = {"clean": CLEAN, "warning": WARNING, "broken": BROKEN, "broken2": BROKEN_TOO, "broken3": BROKEN_TWICE}
    for name, text in texts.items():
        (directory / f"{name}.tex").write_text(text)
    job_run(corpus_import(name="papers", path=str(directory), actor="tester", send=False).pk)
    dispatcher = DispatcherProcess(
        RESULTS_DIR=str(settings.RESULTS_DIR), CORPUS_ROOTS=str(corpus_root), CONVERSION_SANDBOX="bwrap"
    ).start()
    worker = worker_process(dispatcher, scratch=process_tmpdir, service="tex_to_html")
    yield
    process_stop(worker)
    dispatcher.kill()


def _closed(api: APIClient, corpus: str) -> dict[str, Any]:
    """Wait until the pair's run closes by itself (nothing left to convert); its record."""
    pair = f"/api/runs/{corpus}/tex_to_html"

    def record() -> dict[str, Any] | None:
        runs = api.get(pair).json()
        return runs[0] if runs and not runs[0]["open"] else None

    return wait_for(record, timeout=240, interval=0.2, message=f"the run of {pair} to close")


def _state(corpus: str, results: Path) -> dict[str, Any]:
    """Tasks, messages and result files (with their bytes) of a corpus."""
    corpus_id = Corpus.objects.get(name=corpus).pk
    files = {
        str(path.relative_to(results)): path.read_bytes() for path in sorted((results / str(corpus_id)).rglob("*.zip"))
    }
    return {
        "tasks": list(Task.objects.filter(corpus_id=corpus_id).order_by("pk").values_list("pk", "status", "attempts")),
        "messages": list(
            LogMessage.objects.filter(corpus_id=corpus_id).order_by("pk").values_list("pk", "task_id", "what")
        ),
        "files": files,
    }


def test_a_sandbox_converts_and_reports_on_its_own_without_changing_the_parent(authed, farm, settings):
    activated("papers")
    _closed(authed, "papers")
    counts = authed.get("/api/reports/papers/tex_to_html").json()["counts"]
    assert (counts["no_problem"], counts["warning"], counts["error"]) == (1, 1, 3)
    parent = _state("papers", settings.RESULTS_DIR)
    assert len(parent["files"]) == 5

    # Two classes of undefined macros: one document of each, whatever the seed.
    job = corpus_sandbox(
        parent="papers", actor="tester", send=False, name="undefined", service="tex_to_html", severity="error",
        category="undefined", per_class_limit=1, seed=0,
    )  # fmt: skip
    job_run(job.pk)
    assert Job.objects.get(pk=job.pk).state == "succeeded"
    documents = set(Corpus.objects.get(name="undefined").documents.values_list("name", flat=True))
    assert "broken2" in documents and len(documents & {"broken", "broken3"}) == 1 and len(documents) == 2

    activated("undefined")
    first = _closed(authed, "undefined")
    assert first["tallies"]["error"] == 2 and first["tallies"]["total"] == 2
    report = authed.get("/api/reports/undefined/tex_to_html/error/undefined").json()
    assert {row["name"] for row in report["rows"]} == {"\\undefinedmacro", "\\othermacro"}
    sandbox = _state("undefined", settings.RESULTS_DIR)
    assert len(sandbox["files"]) == 2 and not set(sandbox["files"]) & set(parent["files"])
    document = authed.get("/api/corpus/undefined/tex_to_html/document/broken2").json()
    assert document["status"] == "error" and document["result_url"]

    # A rerun of the sandbox converts its documents again; the parent's results stay as they were.
    rerun = authed.post("/api/reports/undefined/tex_to_html/rerun?severity=error")
    assert rerun.status_code == 202 and rerun.json()["tasks"] == 2
    wait_for(
        lambda: authed.get("/api/runs/undefined/tex_to_html").json()[0]["id"] == rerun.json()["run_id"]
        and not authed.get("/api/runs/undefined/tex_to_html").json()[0]["open"],
        timeout=240, interval=0.2, message="the sandbox's rerun to close",
    )  # fmt: skip
    assert _state("papers", settings.RESULTS_DIR) == parent

    refused = authed.delete("/api/corpora/papers?confirm=papers")
    assert refused.status_code == 409 and refused.json()["errors"]["sandboxes"] == ["undefined"]
    assert authed.delete("/api/corpora/undefined?confirm=undefined").status_code == 204
    assert _state("papers", settings.RESULTS_DIR) == parent
