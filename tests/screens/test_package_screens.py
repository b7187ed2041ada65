"""The package screens in real headless Chromium: from a pair's run page to its package ranking, a
closed run's frozen ranking picked in the form, a package's papers, and the diff of two runs, with no
Content-Security-Policy violation."""

from __future__ import annotations

import pytest

from corpora.actions.reports import rerun
from corpora.models import Run
from tests.corpora.helpers import activated, imported
from tests.runs.helpers import pair_close
from tests.runs.test_packages import LOGS, LOGS_AFTER, logs_write
from tests.screens.test_csp_screens import _violations

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

PAIR = "/runs/a/tex_to_html"


def _rows(page, table: str, attribute: str) -> list[str]:
    return [row.get_attribute(attribute) for row in page.locator(f"#{table} tbody tr[{attribute}]").all()]


def test_the_ranking_its_runs_its_papers_and_the_diff(page, live_server, corpus_root):
    imported(corpus_root, "a", documents=4)
    activated("a")
    logs_write(LOGS)
    pair_close()
    rerun(corpus_name="a", service_name="tex_to_html", actor="tester", description="minted fixed")
    logs_write(LOGS_AFTER)
    pair_close()
    first = Run.objects.order_by("started_at").first()
    violations = _violations(page)

    page.goto(f"{live_server.url}{PAIR}")
    page.click("#packages-link")
    page.wait_for_url(f"{live_server.url}{PAIR}/packages")
    assert _rows(page, "packages", "data-package")[:2] == ["package:mathpartir", "package:minted"]
    assert page.inner_text("tr[data-package='package:minted'] td:nth-child(5)") == "1"  # papers now

    page.select_option("#run", str(first.pk))
    page.click("#package-filters button[type=submit]")
    page.wait_for_url(f"**/packages?run={first.pk}**")
    assert page.inner_text("tr[data-package='package:minted'] td:nth-child(5)") == "2"  # as the run froze it
    page.click("tr[data-package='package:minted'] a")
    page.wait_for_url(f"**/packages/package/minted?run={first.pk}")
    assert _rows(page, "package-papers", "data-document") == ["doc1", "doc3"]

    page.goto(f"{live_server.url}{PAIR}/packages/diff")
    assert _rows(page, "package-changes", "data-package") == ["package:minted"]
    assert "doc1" in page.inner_text("tr[data-package='package:minted'] td.lost")
    assert violations == []
