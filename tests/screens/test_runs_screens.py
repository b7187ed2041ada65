"""The run screens in real headless Chromium (Debian's, driven by Playwright): a pair's run page draws
one stacked bar per run; a heat-map cell leads to exactly the document that changed that way; the
comparison of two converters, picked on the corpus page, shows the document on which they differ; and no
run screen violates the Content-Security-Policy."""

from __future__ import annotations

from typing import Any

import pytest

from conversion.taxonomy import meaning_of
from corpora.actions.reports import rerun
from corpora.models import Run, Snapshot
from tests.corpora.helpers import activated, imported
from tests.runs.helpers import NEXT, classes_write, pair_close, two_runs
from tests.screens.test_csp_screens import _sign_in, _violations

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

PAIR = "/runs/a/tex_to_html"
COMPARE = f"/compare/a/tex_to_html/{NEXT}"


@pytest.fixture
def history(corpus_root) -> None:
    two_runs(corpus_root)


def _documents(page: Any, table: str) -> list[str]:
    return [row.get_attribute("data-document") for row in page.locator(f"#{table} tbody tr[data-document]").all()]


def test_the_run_page_charts_each_run_and_a_heat_map_cell_leads_to_the_changed_document(
    page, live_server, history, tmp_path
):
    violations = _violations(page)
    page.goto(f"{live_server.url}/corpora/a")
    page.click(f"tr[data-service='tex_to_html'] a[href='{PAIR}']")
    page.wait_for_url(f"{live_server.url}{PAIR}")

    runs = list(Run.objects.filter(service__name="tex_to_html").order_by("started_at").values_list("pk", flat=True))
    bars = page.locator("#tallies-chart g.run")
    assert [int(bar.get_attribute("data-run")) for bar in bars.all()] == runs
    # Both runs tallied 4 tasks: their stacks are drawn equally tall, side by side, oldest first, each
    # status's share of its stack as tall as its share of the tasks.
    stacks = [[rect.bounding_box() for rect in bar.locator("rect").all()] for bar in bars.all()]
    heights = [sum(box["height"] for box in stack) for stack in stacks]
    assert heights[0] > 100 and heights[0] == pytest.approx(heights[1], abs=1)
    assert stacks[0][0]["x"] < stacks[1][0]["x"]
    first_fatal = page.locator(f"#tallies-chart g.run[data-run='{runs[0]}'] rect.st-fatal").bounding_box()
    first_ok = page.locator(f"#tallies-chart g.run[data-run='{runs[0]}'] rect.st-no_problem").bounding_box()
    assert first_fatal["height"] == pytest.approx(heights[0] / 4, abs=1)
    assert first_ok["height"] == pytest.approx(heights[0] / 2, abs=1)
    assert first_ok["y"] > first_fatal["y"]  # no problem at the bottom
    assert page.locator(f"#tallies-chart g.run[data-run='{runs[1]}'] rect.st-fatal").count() == 0
    assert page.locator("#regressions a").all_inner_texts() == ["doc1"]
    page.screenshot(path=tmp_path / "runs-pair.png", full_page=True)

    cell = page.locator("#heat-map td[data-row='no_problem'][data-column='error']")
    assert "regression" in cell.get_attribute("class").split()
    cell.locator("a").click()
    page.wait_for_url("**/runs/a/tex_to_html/tasks?**")
    assert _documents(page, "task-diffs") == ["doc1"]
    assert page.inner_text("#task-diffs tr[data-document='doc1']").split() == ["doc1", "no_problem", "error", "▲"]

    page.click("#task-diffs a:text-is('doc1')")
    page.wait_for_url(f"{live_server.url}/corpus/a/tex_to_html/document/doc1")
    assert page.inner_text("#document-status") == "error"
    assert violations == []


def test_the_diff_screen_picks_two_snapshots_and_its_cells_list_their_documents(page, live_server, history, tmp_path):
    violations = _violations(page)
    page.goto(f"{live_server.url}{PAIR}/diff")
    dates = page.locator("#previous option").all()
    assert len(dates) == 2
    # Swap the two snapshots: doc3 went from warning back to fatal, doc1 from error back to no problem.
    page.select_option("#previous", dates[0].get_attribute("value"))
    page.select_option("#current", dates[1].get_attribute("value"))
    page.click("#pick-snapshots button[type=submit]")
    page.wait_for_url("**/runs/a/tex_to_html/diff?previous=**")
    assert page.inner_text("#diff-stats [data-stat='regressions']") == "1"
    page.screenshot(path=tmp_path / "runs-diff.png", full_page=True)
    page.click("#heat-map td[data-row='warning'][data-column='fatal'] a")
    page.wait_for_url("**/runs/a/tex_to_html/tasks?**")
    assert _documents(page, "task-diffs") == ["doc3"]
    page.screenshot(path=tmp_path / "runs-tasks.png", full_page=True)
    assert violations == []


def test_the_comparison_picked_on_the_corpus_page_shows_the_differing_document(page, live_server, history, tmp_path):
    violations = _violations(page)
    page.goto(f"{live_server.url}/corpora/a")
    page.select_option("#service_a", "tex_to_html")
    page.select_option("#service_b", NEXT)
    page.click("#compare-services button[type=submit]")
    page.wait_for_url(f"{live_server.url}{COMPARE}")
    assert page.inner_text("#compare-stats [data-stat='differ']") == "1"
    page.screenshot(path=tmp_path / "runs-compare.png", full_page=True)

    page.click("#heat-map td[data-row='warning'][data-column='fatal'] a")
    page.wait_for_url(f"**{COMPARE}/tasks?**")
    assert _documents(page, "compare-tasks") == ["doc3"]
    page.click(f"#compare-tasks tr[data-document='doc3'] a[href='/corpus/a/{NEXT}/document/doc3']")
    page.wait_for_url(f"{live_server.url}/corpus/a/{NEXT}/document/doc3")
    assert page.inner_text("#document-status") == "fatal"
    assert violations == []


def test_the_snapshot_button_adds_a_snapshot_date(page, live_server, token, history):
    violations = _violations(page)
    _sign_in(page, live_server, token)
    page.goto(f"{live_server.url}{PAIR}")
    assert page.locator("#snapshots time").count() == 2
    page.click("#take-snapshot button")
    page.wait_for_selector("ul.messages")
    assert "Snapshot of 4 tasks taken" in page.inner_text("ul.messages")
    assert page.locator("#snapshots time").count() == 3
    assert Snapshot.objects.filter(service__name="tex_to_html").count() == 3
    assert violations == []


RUN_SCREENS = [
    "/runs",
    "/runs?service=tex_to_html&limit=1",
    PAIR,
    f"{PAIR}/diff",
    f"{PAIR}/tasks",
    f"{PAIR}/tasks?change=regressed",
    COMPARE,
    f"{COMPARE}/tasks",
    "/reports/a/tex_to_html",
    "/corpora/a",
    f"{PAIR}/classes",
    f"{PAIR}/classes?kind=increased&severity=error,fatal",
    "/corpus/a/tex_to_html/document/doc1/history",
]


def test_no_run_screen_violates_the_policy(page, live_server, token, history):
    violations = _violations(page)
    _sign_in(page, live_server, token)
    for path in RUN_SCREENS:
        response = page.goto(f"{live_server.url}{path}")
        assert response.status == 200, path
        assert "default-src 'self'" in response.headers["content-security-policy"], path
    assert violations == []


UNDEFINED_A = ("error", "undefined", "\\alpha")
UNDEFINED_B = ("error", "undefined", "\\beta")
MISSING = ("warning", "missing_file", "x.sty")
IO_FATAL = ("fatal", "I/O", "a b/c?d#e")  # category and what with '/' and reserved characters


@pytest.fixture
def class_history(corpus_root) -> None:
    """Corpus a (doc0..doc3) with two closed runs of tex_to_html: doc0's undefined \\alpha is fixed by the
    second, doc2 gains an undefined \\beta, doc3 keeps its fatal I/O error and doc1 its warning."""
    imported(corpus_root, "a", documents=4)
    activated("a")
    classes_write([{UNDEFINED_A}, {MISSING}, set(), {IO_FATAL}])
    pair_close()
    rerun(corpus_name="a", service_name="tex_to_html", actor="tester", description="the fix")
    classes_write([set(), {MISSING}, {UNDEFINED_B}, {IO_FATAL}])
    pair_close()


def _class_rows(page: Any, table: str) -> list[str]:
    return [row.get_attribute("data-class") for row in page.locator(f"#{table} tbody tr[data-class]").all()]


def test_new_and_fixed_failures_lead_to_their_documents_and_each_document_s_history(
    page, live_server, class_history, tmp_path
):
    violations = _violations(page)
    page.goto(f"{live_server.url}{PAIR}")
    assert _class_rows(page, "new-failures") == ["error:undefined:\\beta"]
    assert _class_rows(page, "fixed-failures") == ["error:undefined:\\alpha"]
    assert page.inner_text("#fixed-failures tbody tr td.num >> nth=2") == "-1"
    assert page.inner_text("#fixed-failures .meaning") == meaning_of("error", "undefined").meaning
    page.screenshot(path=tmp_path / "runs-failures.png", full_page=True)

    page.click("#fixed-failures a.lost")
    page.wait_for_url("**/runs/a/tex_to_html/classes/error/undefined/**/tasks?**change=lost**")
    assert _documents(page, "class-tasks") == ["doc0"]
    page.click("#other-change")
    page.wait_for_url("**change=gained**")
    assert _documents(page, "class-tasks") == []

    page.go_back()
    page.click("#class-tasks a:text-is('history')")
    page.wait_for_url(f"{live_server.url}/corpus/a/tex_to_html/document/doc0/history")
    # The strip, oldest first: error in the first run, no problem after the fix.
    assert [cell.get_attribute("data-status") for cell in page.locator("#status-strip rect").all()] == [
        "error",
        "no_problem",
    ]
    first, second = (box["x"] for box in (rect.bounding_box() for rect in page.locator("#status-strip rect").all()))
    assert first < second
    rows = page.locator("#history tbody tr").all()
    assert [row.get_attribute("data-status") for row in rows] == ["no_problem", "error"]
    assert [cell.inner_text() for cell in rows[1].locator("td.had").all()] == ["●"]
    assert [cell.inner_text() for cell in rows[0].locator("td.had").all()] == ["·"]
    page.screenshot(path=tmp_path / "document-history.png", full_page=True)

    page.click("text=The document now")
    page.wait_for_url(f"{live_server.url}/corpus/a/tex_to_html/document/doc0")
    page.click("#history-link")
    page.wait_for_url(f"{live_server.url}/corpus/a/tex_to_html/document/doc0/history")

    page.goto(f"{live_server.url}{PAIR}/diff")
    page.click("#new-failures a.gained")
    page.wait_for_url("**change=gained**")
    assert _documents(page, "class-tasks") == ["doc2"]
    page.goto(f"{live_server.url}{PAIR}/classes?kind=appeared")
    assert _class_rows(page, "class-changes") == ["error:undefined:\\beta"]
    page.goto(f"{live_server.url}{PAIR}/classes")
    assert sorted(_class_rows(page, "class-changes")) == ["error:undefined:\\alpha", "error:undefined:\\beta"]
    assert violations == []
