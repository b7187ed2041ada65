"""Screens as operators see them at 1400 x 1000 in real headless Chromium (Debian's, driven by Playwright):
the statistics and exports tables, the export form and the passkey name input are styled like their peers;
the runs table fits the window; histograms have a count axis; a heat map tells fixes from regressions by
colour; runs named on document history and in the rerun banner are links to their rows; the open run's
throughput shows only while a run is open; the corpora list's service chips lead to their reports."""

from __future__ import annotations

from typing import Any

import pytest

from conversion.choices import TaskStatus
from corpora.actions.reports import rerun
from corpora.export.actions import dataset_export
from corpora.models import Run, Task
from jobs.runner import job_run
from tests.runs.helpers import pair_close, two_runs
from tests.screens.test_csp_screens import _sign_in, _violations
from tests.screens.test_report_screens import converted  # noqa: F401  (the fixture: corpus c, converted)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

VIEWPORT = {"width": 1400, "height": 1000}
TABLE = ["border-top-width", "border-top-style", "border-top-color", "background-color", "border-collapse"]
HEAD = ["background-color", "padding-top", "padding-left", "font-weight", "font-size", "color", "border-bottom-width"]
CELL = ["padding-top", "padding-left", "border-bottom-width", "border-bottom-style", "border-bottom-color"]
INPUT = [
    "padding-top", "padding-left", "border-top-width", "border-top-style", "border-top-color", "border-radius",
    "font-family", "font-size",
]  # fmt: skip
BOX = ["background-color", "border-top-width", "border-top-style", "border-top-color"]


@pytest.fixture
def history(corpus_root) -> None:
    two_runs(corpus_root)


@pytest.fixture
def wide(page: Any) -> Any:
    page.set_viewport_size(VIEWPORT)
    return page


def _style(page: Any, selector: str, properties: list[str]) -> dict[str, str]:
    """The computed values of `properties` on the first element matching `selector`."""
    return page.eval_on_selector(
        selector,
        "(el, names) => Object.fromEntries(names.map(n => [n, getComputedStyle(el).getPropertyValue(n)]))",
        properties,
    )


def _table_style(page: Any, table: str) -> dict[str, dict[str, str]]:
    return {
        "table": _style(page, table, TABLE),
        "th": _style(page, f"{table} thead th", HEAD),
        "td": _style(page, f"{table} tbody td", CELL),
    }


def _rgb(value: str) -> tuple[int, ...]:
    return tuple(int(part) for part in value[value.index("(") + 1 : value.index(")")].split(",")[:3])


def test_the_statistics_and_exports_tables_and_the_export_form_look_like_their_peers(
    wide,
    live_server,
    token,
    converted,  # noqa: F811
    settings,
    tmp_path,
):
    settings.EXPORT_ROOT = (tmp_path / "exports").resolve()
    settings.EXPORT_ROOT.mkdir()
    # The last TODO task finishes and the run closes: a row of statistics.
    Task.objects.filter(corpus__name="c", status=TaskStatus.TODO).update(status=TaskStatus.NO_PROBLEM)
    pair_close("c")
    job = dataset_export(
        corpus="c", service="tex_to_html", group_by="severity", severities=["error"], actor="t", send=False
    )
    job_run(job.pk)
    violations = _violations(wide)
    _sign_in(wide, live_server, token)
    peer = _table_style(wide, "#corpora")  # the corpora list: a styled table

    wide.goto(f"{live_server.url}/statistics")
    assert wide.locator("#statistics tbody tr").count() == 1
    assert _table_style(wide, "#statistics") == peer
    wide.screenshot(path=tmp_path / "statistics.png", full_page=True)

    wide.goto(f"{live_server.url}/exports")
    assert wide.locator("#exports tbody tr").count() == 1
    assert _table_style(wide, "#exports") == peer
    wide.screenshot(path=tmp_path / "exports.png", full_page=True)

    # The export form is a box like the manage box above it; its fields are styled like every other field.
    wide.goto(f"{live_server.url}/reports/c/tex_to_html")
    assert _style(wide, "#export", BOX) == _style(wide, "#manage", BOX)
    assert _style(wide, "#export-out", INPUT) == _style(wide, "#rerun-all input[type=text]", INPUT)
    assert _style(wide, "#export-group-by", INPUT) == _style(wide, "#rerun-all input[type=text]", INPUT)
    boxes = [label.bounding_box() for label in wide.locator("#export fieldset label").all()]
    assert len(boxes) > 1 and len({box["y"] for box in boxes}) == 1  # the severities side by side
    wide.locator("#export").screenshot(path=tmp_path / "export-form.png")
    assert violations == []


def test_the_passkey_name_input_is_styled_like_every_text_input(wide, live_server, token, tmp_path):
    _sign_in(wide, live_server, token)
    wide.goto(f"{live_server.url}/runs")
    peer = _style(wide, "#f-corpus", INPUT)
    wide.goto(f"{live_server.url}/passkeys")
    assert _style(wide, "#passkey-name", INPUT) == peer
    wide.locator("#passkey-register").screenshot(path=tmp_path / "passkey-register.png")


def test_the_runs_table_fits_a_1400_pixel_window(wide, live_server, history, tmp_path):
    # What operators' runs carry: an engine with versions and a profile hash, a long description.
    Run.objects.update(
        engine="latexml",
        engine_versions=["latexmlc (LaTeXML version 0.8.7)", "latexmlc (LaTeXML version 0.8.8)"],
        profile_hash="9f2c" * 16,
        description="after the upgrade of the TeX Live packages and the LaTeXML bindings " * 2,
    )
    Run.objects.filter(pk=Run.objects.order_by("pk").first().pk).update(profile_hashes=["a" * 64, "b" * 64])
    wide.goto(f"{live_server.url}/runs")
    assert wide.locator("#runs tbody tr[data-run]").count() == 3
    wide.screenshot(path=tmp_path / "runs.png", full_page=True)
    assert wide.evaluate("document.scrollingElement.scrollWidth") <= VIEWPORT["width"]
    # The table stays inside its container's content box (the page's column), not only inside the window.
    table, container = wide.eval_on_selector(
        "#runs",
        """el => { const box = el.parentElement, s = getComputedStyle(box);
                   return [el.getBoundingClientRect().width,
                           box.clientWidth - parseFloat(s.paddingLeft) - parseFloat(s.paddingRight)]; }""",
    )
    assert table <= container


def test_the_histograms_have_a_count_axis(wide, live_server, token, converted, tmp_path):  # noqa: F811
    _sign_in(wide, live_server, token)
    wide.goto(f"{live_server.url}/services/tex_to_html/runtimes")
    _axis_holds_the_bars(wide, "#histogram", "rect.bar", "conversions")
    wide.locator("#histogram").screenshot(path=tmp_path / "runtime-histogram.png")

    wide.goto(f"{live_server.url}/runs/c/tex_to_html")
    charts = wide.locator(".stage-chart svg:has(rect[data-count])").all()
    assert charts  # end to end, at least
    for chart in charts:
        _axis_holds_the_bars(wide, f"#{chart.get_attribute('id')}", "rect[data-count]", "tasks")
    wide.locator(".stage-charts").screenshot(path=tmp_path / "stage-histograms.png")


def _axis_holds_the_bars(page: Any, svg: str, bars: str, label: str) -> None:
    """The chart's y axis: labelled, its ticks counting up from 0, each as high as a bar of its count, and
    left of every bar."""
    ticks = page.locator(f"{svg} .y-axis text.tick").all()
    values = [int(tick.text_content()) for tick in ticks]
    assert len(values) >= 2 and values[0] == 0 and values == sorted(values), values
    assert page.text_content(f"{svg} .y-axis .axis-label") == label
    heights = {tick.text_content(): tick.bounding_box() for tick in ticks}
    rects = page.locator(f"{svg} {bars}").all()
    axis_right = max(box["x"] + box["width"] for box in heights.values())
    assert all(rect.bounding_box() is None or rect.bounding_box()["x"] >= axis_right for rect in rects)
    floor = heights["0"]["y"] + heights["0"]["height"] / 2
    unit = (floor - (heights[str(values[-1])]["y"] + heights[str(values[-1])]["height"] / 2)) / values[-1]
    for rect in rects:
        count, box = int(rect.get_attribute("data-count")), rect.bounding_box()
        if count:
            assert box["height"] == pytest.approx(count * unit, abs=1.5), (svg, count)


def test_the_heat_map_colours_fixes_and_regressions_apart(wide, live_server, history, tmp_path):
    violations = _violations(wide)
    wide.goto(f"{live_server.url}/runs/a/tex_to_html/diff")
    regression = "#heat-map td[data-row='no_problem'][data-column='error']"  # doc1 got worse
    fix = "#heat-map td[data-row='fatal'][data-column='warning']"  # doc3 got better
    same = "#heat-map td[data-row='warning'][data-column='warning']"
    worse, better, unchanged = (
        _rgb(_style(wide, cell, ["background-color"])["background-color"]) for cell in (regression, fix, same)
    )
    assert len({worse, better, unchanged}) == 3
    assert worse[0] > worse[1] and better[1] > better[0]  # red-ish, green-ish
    assert max(unchanged) - min(unchanged) < 30  # grey
    # The legend shows each kind in the colour of its cells.
    for kind, cell in (("fix", fix), ("regression", regression)):
        key = _style(wide, f"#heat-map .heat-legend i.heat-{kind}", ["background-color"])
        assert key == _style(wide, cell, ["background-color"])
    wide.locator("#heat-map").screenshot(path=tmp_path / "heat-map.png")
    assert violations == []


def test_runs_named_in_the_rerun_banner_and_on_document_history_lead_to_their_rows(
    wide, live_server, token, history, tmp_path
):
    violations = _violations(wide)
    _sign_in(wide, live_server, token)
    wide.goto(f"{live_server.url}/corpus/a/tex_to_html/document/doc1/history")
    first = Run.objects.filter(service__name="tex_to_html").order_by("started_at").first()
    link = wide.locator(f"#history a:text-is('run {first.pk}')")
    link.click()
    wide.wait_for_url(f"{live_server.url}/runs/a/tex_to_html#run-{first.pk}")
    assert wide.locator(f"#runs tr#run-{first.pk}").get_attribute("data-run") == str(first.pk)
    assert wide.evaluate("document.querySelector(':target').id") == f"run-{first.pk}"

    wide.goto(f"{live_server.url}/reports/a/tex_to_html")
    wide.once("dialog", lambda dialog: dialog.accept())
    wide.click("#rerun-all button[type=submit]")
    wide.wait_for_selector("ul.messages")
    opened = Run.objects.get(service__name="tex_to_html", finished_at__isnull=True)
    assert wide.inner_text("ul.messages") == f"4 tasks set to TODO in run {opened.pk}."
    wide.click(f"ul.messages a:text-is('run {opened.pk}')")
    wide.wait_for_url(f"{live_server.url}/runs/a/tex_to_html#run-{opened.pk}")
    assert wide.locator(f"#runs tr#run-{opened.pk}").get_attribute("class") == "open"
    assert violations == []


def test_the_open_run_s_throughput_shows_only_while_a_run_is_open(wide, live_server, history):
    wide.goto(f"{live_server.url}/runs/a/tex_to_html")
    assert wide.locator("#telemetry").count() == 1
    assert "Throughput" not in wide.inner_text("#telemetry")
    rerun(corpus_name="a", service_name="tex_to_html", actor="tester")
    wide.goto(f"{live_server.url}/runs/a/tex_to_html")
    assert wide.inner_text("#telemetry h3 >> nth=0") == "Throughput of the open run"


def test_the_service_chips_of_the_corpora_list_lead_to_their_reports(wide, live_server, token, history):
    _sign_in(wide, live_server, token)
    chips = wide.locator("#corpora tr[data-corpus='a'] td:nth-child(4) a")
    assert sorted(chips.all_inner_texts()) == ["tex_to_html", "tex_to_html_next"]
    chips.filter(has_text="tex_to_html_next").click()
    wide.wait_for_url(f"{live_server.url}/reports/a/tex_to_html_next")
    assert "tex_to_html_next" in wide.inner_text("h1")
