"""Profile experiments in real headless Chromium: the form starts one (answered with its page), a refused
variant comes back on the form with the profile checker's words, and the detail page ranks the variants with
the papers behind each number linked to their document pages."""

from __future__ import annotations

import json

import pytest

from conversion.choices import TaskStatus as S
from corpora.models import Experiment
from jobs.models import Job
from jobs.runner import job_run
from tests.corpora.helpers import activated, imported
from tests.runs.helpers import finish
from tests.screens.conftest import sign_in_on_the_way

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


@pytest.fixture
def pair(corpus_root) -> None:
    imported(corpus_root, "a", documents=4)
    activated("a")
    finish([S.NO_PROBLEM, S.ERROR, S.FATAL, S.ERROR])


def test_an_operator_starts_an_experiment_and_reads_its_ranking(page, live_server, token, pair):
    sign_in_on_the_way(page, f"{live_server.url}/experiments/new", token)
    page.fill("#corpus", "a")
    page.fill("#service", "tex_to_html")
    page.fill("#name", "exp")
    page.fill("#variants", json.dumps([{"name": "bad", "changes": {"nosuchoption": True}}]))
    page.click("#experiment-new button[type=submit]")
    assert "nosuchoption" in page.inner_text("#variants-errors")
    assert not Experiment.objects.exists()

    guards = (
        "[nobibtex,ids,localrawstyles,nobreakuntex,mathparserspeculate,magnify=1.8,zoomout=1.8,"
        "tokenlimit=249999999,iflimit=3599999,absorblimit=1299999,pushbacklimit=599999]latexml.sty"
    )
    variants = [
        {"name": "styles", "changes": {"includestyles": True}},
        {"name": "control", "changes": {}},
        {"name": "guards", "changes": {"preloads": [guards]}},  # a long option wraps inside its cell
    ]
    page.fill("#variants", json.dumps(variants))
    page.click("#experiment-new button[type=submit]")
    page.wait_for_url(f"{live_server.url}/experiments/exp")
    job_run(Job.objects.get(kind="experiment_run").pk)  # no Celery worker here: the test runs the job
    finish([S.NO_PROBLEM, S.WARNING, S.FATAL], "exp.styles", "exp")  # fixes doc1 and doc2, breaks doc3
    finish([S.ERROR, S.FATAL, S.ERROR], "exp.control", "exp")
    finish([S.ERROR, S.FATAL, S.FATAL], "exp.guards", "exp")

    page.goto(f"{live_server.url}/experiments/exp")
    rows = page.locator("#experiment-ranking tbody tr")
    assert rows.nth(0).get_attribute("data-variant") == "styles"
    assert rows.nth(1).get_attribute("data-variant") == "control"
    assert rows.nth(2).get_attribute("data-variant") == "guards"
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")  # the ranking fits
    styles = rows.nth(0)
    assert styles.locator("[data-count=progress]").inner_text() == "3 / 3"
    assert styles.locator("[data-count=fixed] .num").inner_text() == "2"
    assert styles.locator("[data-count=broken] .num").inner_text() == "1"
    assert styles.locator("[data-count=fixed] a").all_inner_texts() == ["doc1", "doc2"]
    styles.locator("[data-count=broken] a", has_text="doc3").click()
    page.wait_for_url(f"{live_server.url}/corpus/exp/exp.styles/document/doc3")

    page.goto(f"{live_server.url}/experiments")
    assert page.locator("#experiments tr[data-experiment=exp]").inner_text().count("styles, control, guards") == 1
