"""A profile experiment converts for real: a dispatcher and a `manage.py worker --all-services` (latexmlc in its
bubblewrap sandbox) convert the pair, then each variant on the sandbox of its failures. A paper that needs
its own style file is an error under the default profile and converts with --includestyles (fixed); a
one-second timeout turns an error into a fatal (broken): the paper counts to 30,000 in TeX first, several
seconds of LaTeXML on any machine, so the timeout fires wherever the suite runs; the clean paper is never carved."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from corpora.experiments.actions import experiment_start
from corpora.experiments.queries import experiment_detail
from corpora.models import Document
from jobs.runner import job_run
from tests.corpora.helpers import activated
from tests.dispatcher.harness import DispatcherProcess, process_stop, wait_for, worker_process

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

CLEAN = "\\documentclass{article}\n\\begin{document}\nHello $x^2$.\n\\end{document}\n"
STYLED = (
    "\\documentclass{article}\n\\usepackage{mystyle}\n\\newcount\\n\n\\begin{document}\n"
    "\\loop\\advance\\n by1 \\ifnum\\n<30000 \\repeat\nSee \\mymacro.\n\\end{document}\n"
)
STYLE = "\\newcommand{\\mymacro}{a macro of my own}\n"


@pytest.fixture
def farm(tmp_path: Path, corpus_root: Path, settings, process_tmpdir: Path) -> Iterator[None]:
    """Corpus `papers` (clean, and `styled` with its own style file) converted by tex_to_html; a dispatcher
    and one real worker serving every service."""
    if not shutil.which("latexmlc"):
        pytest.fail("latexmlc is not installed: apt-get install latexml")
    settings.RESULTS_DIR = tmp_path / "results"
    directory = corpus_root / "papers"
    (directory / "styled").mkdir(parents=True)
    (directory / "clean.tex").write_text(CLEAN)
    (directory / "styled" / "main.tex").write_text(STYLED)
    (directory / "styled" / "mystyle.sty").write_text(STYLE)
    from corpora.actions.corpora import corpus_import

    job_run(corpus_import(name="papers", path=str(directory), actor="tester", send=False).pk)
    dispatcher = DispatcherProcess(
        RESULTS_DIR=str(settings.RESULTS_DIR), CORPUS_ROOTS=str(corpus_root), CONVERSION_SANDBOX="bwrap"
    ).start()
    worker = worker_process(dispatcher, "--all-services", service=None, scratch=process_tmpdir, concurrency=2)
    yield
    process_stop(worker)
    dispatcher.kill()


def _converted(api, corpus: str, service: str) -> None:
    def closed() -> bool:
        runs = api.get(f"/api/runs/{corpus}/{service}").json()
        return bool(runs) and not runs[0]["open"]

    wait_for(closed, timeout=300, interval=0.3, message=f"the run of {corpus}/{service} to close")


def test_an_experiment_ranks_a_variant_that_fixes_above_one_that_breaks(authed, farm):
    activated("papers")
    _converted(authed, "papers", "tex_to_html")
    statuses = {
        d["document"]: d["status"]
        for d in authed.get("/api/corpora/papers/services/tex_to_html/documents").json()["documents"]
    }
    assert statuses == {"clean": "no_problem", "styled": "error"}, statuses

    variants = [
        {"name": "styles", "changes": {"includestyles": True}},
        {"name": "hurried", "changes": {"timeout_seconds": 1}},
    ]
    job = experiment_start(corpus="papers", service="tex_to_html", name="exp", variants=variants, actor="tester",
                           send=False)  # fmt: skip
    job_run(job.pk)
    assert list(Document.objects.filter(corpus__name="exp").values_list("name", flat=True)) == ["styled"]
    for service in ("exp.styles", "exp.hurried"):
        _converted(authed, "exp", service)

    answer = authed.get("/api/experiments/exp").json()
    ranked = [(v["rank"], v["name"], v["done"], v["total"], v["fixed"], v["broken"]) for v in answer["variants"]]
    assert ranked == [(1, "styles", 1, 1, 1, 0), (2, "hurried", 1, 1, 0, 1)], answer
    assert [p["name"] for p in answer["variants"][0]["fixed_papers"]] == ["styled"]
    assert [p["name"] for p in answer["variants"][1]["broken_papers"]] == ["styled"]
    assert answer["variants"][0]["fixed_papers"][0]["report"] == "/api/corpus/exp/exp.styles/document/styled"
    assert experiment_detail("exp").variants[0].fixed_papers[0].service == "exp.styles"
