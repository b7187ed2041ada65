"""The run page's cost in real headless Chromium: it shows what GET /api/runs/{c}/{s}/cost gives, and
violates no Content-Security-Policy."""

from __future__ import annotations

import pytest
from django.db import connection, transaction

from corpora.models import Run
from corpora.telemetry import results_record
from tests.corpora.helpers import activated, imported
from tests.screens.test_csp_screens import _violations

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

# (CPU ms, peak KiB) of six results; the last one's worker measured nothing.
COSTS = [(1_500, 90_000), (2_500, 110_000), (4_000, 150_000), (9_000, 400_000), (30_000, 1_200_000), (None, None)]


@pytest.fixture
def costed(corpus_root) -> Run:
    imported(corpus_root, "a", documents=8)
    activated("a")
    run = Run.objects.get(corpus__name="a", service__name="tex_to_html", finished_at__isnull=True)
    now = run.started_at.timestamp() + 30
    rows = [(run.pk, now - 5, run.started_at.timestamp(), now - 1)] * len(COSTS)
    with transaction.atomic(), connection.cursor() as cursor:
        results_record(cursor, rows, costs=[(run.pk, cpu, peak) for cpu, peak in COSTS], applied=now)
    return run


def test_the_run_page_shows_the_cost_its_api_gives(page, live_server, api, costed):
    violations = _violations(page)
    page.goto(f"{live_server.url}/runs/a/tex_to_html")
    run = api.get("/api/runs/a/tex_to_html/cost").json()["open_run"]
    row = page.locator(f"#cost-table tr[data-run='{costed.pk}']")

    def cell(name: str) -> str:
        return row.locator(f"[data-field='{name}']").inner_text()

    assert run["cpu_seconds"] == 47.0 and run["measured"] == 5 and run["results"] == 6
    assert cell("results") == "6 (5 measured)"
    assert cell("cpu_seconds") == "47 s"
    assert run["cpu_seconds_per_paper"] == 9.4 and cell("cpu_seconds_per_paper") == "9.4 s"
    assert cell("papers_per_core_hour") == f"{run['papers_per_core_hour']:.1f}" == "383.0"
    memory = run["peak_memory"]
    for name in ("p50", "p90", "p99"):
        assert cell(f"peak_{name}") == f"{round(memory[name]['mib'])} MiB"
    assert cell("peak_max") == f"< {round(memory['max']['to_mib'])} MiB"
    corpus, arxiv = run["projections"]["corpus"], run["projections"]["arxiv"]
    assert cell("core_hours_corpus").startswith(f"{corpus['core_hours']:,.1f} core-hours") and "(8 papers)" in cell(
        "core_hours_corpus"
    )
    assert cell("core_hours_arxiv") == f"{arxiv['core_hours']:,.1f} core-hours (2,800,000 papers)"
    assert violations == []
