"""The run screens' SVG geometry (runs.charts): pure functions of the DTOs, no database."""

from __future__ import annotations

from corpora.statuses import OVERVIEW_ORDER
from runs.charts import (
    CHART,
    HEAT_LEVELS,
    STAGE_CHART,
    STRIP,
    THROUGHPUT_CHART,
    count_axis,
    heat_kind,
    heat_level,
    heat_map,
    history_strip,
    run_chart,
    stage_charts,
    throughput_chart,
)


def _tallies(**counts: int) -> dict[str, int]:
    tallies = dict.fromkeys(OVERVIEW_ORDER, 0) | counts
    return tallies | {"total": sum(counts.values())}


def _run(started_at: str, tallies: dict[str, int] | None) -> dict:
    return {"started_at": started_at, "tallies": tallies}


def test_the_run_chart_draws_the_oldest_run_on_the_left_and_skips_runs_without_tallies():
    newest = _run("2026-03-02T10:00:00Z", _tallies(no_problem=10))
    untallied = _run("2026-03-01T12:00:00Z", None)
    oldest = _run("2026-03-01T10:00:00Z", _tallies(no_problem=5))
    chart = run_chart([newest, untallied, oldest])
    assert [bar["run"] for bar in chart["bars"]] == [oldest, newest]
    assert chart["bars"][0]["x"] < chart["bars"][1]["x"]
    assert chart["bars"][0]["label"] == "03-01 10:00"


def test_the_run_chart_scales_the_largest_total_to_the_plot_and_stacks_no_problem_at_the_bottom():
    chart = run_chart([_run("2026-03-01T10:00:00Z", _tallies(no_problem=30, error=10)),
                       _run("2026-03-01T09:00:00Z", _tallies(fatal=20))])  # fmt: skip
    assert chart["peak"] == 40
    segments = chart["bars"][1]["segments"]
    assert [segment["key"] for segment in segments] == ["no_problem", "error"]
    assert sum(segment["height"] for segment in segments) == CHART["plot"]
    bottom = segments[0]
    assert bottom["y"] + bottom["height"] == CHART["top"] + CHART["plot"]
    assert chart["bars"][0]["segments"][0]["height"] == CHART["plot"] / 2


def test_the_run_chart_of_no_runs_has_no_bars():
    assert run_chart([])["bars"] == []


def test_the_throughput_chart_leaves_a_minute_without_results_empty():
    minutes = [
        {"minute": "2026-03-01T10:00:00Z", "completed": 4},
        {"minute": "2026-03-01T10:02:00Z", "completed": 8},
    ]
    chart = throughput_chart(minutes)
    slot = THROUGHPUT_CHART["width"] / 3
    first, last = chart["bars"]
    assert chart["peak"] == 8
    assert last["x"] == round(2 * slot + slot * 0.1, 2)
    assert last["height"] == THROUGHPUT_CHART["plot"]
    assert first["height"] == THROUGHPUT_CHART["plot"] / 2
    assert first["y"] + first["height"] == THROUGHPUT_CHART["axis_y"]
    assert first["label"] == "10:00"


def test_the_throughput_chart_of_no_minutes_is_empty():
    assert throughput_chart([]) == {"size": THROUGHPUT_CHART, "bars": [], "peak": 0}


def test_a_stage_histogram_keeps_its_x_axis_logarithmic_across_empty_bins():
    # Bins 4 and 7 (corpora.telemetry: a bin's upper bound is 2^((b + 1) / 4) ms): two empty slots between.
    histogram = [{"from_ms": 2.0, "to_ms": 2 ** (5 / 4), "count": 3}, {"from_ms": 2**1.75, "to_ms": 4.0, "count": 6}]
    (chart,) = stage_charts([{"stage": "queue_wait", "histogram": histogram}])
    slot = STAGE_CHART["width"] / 4
    assert chart["title"] == "queue wait"
    assert [bar["x"] for bar in chart["bars"]] == [round(slot * 0.1, 2), round(3 * slot + slot * 0.1, 2)]
    assert [bar["height"] for bar in chart["bars"]] == [STAGE_CHART["plot"] / 2, STAGE_CHART["plot"]]


def test_a_stage_without_durations_has_a_chart_with_no_bars():
    (chart,) = stage_charts([{"stage": "conversion", "histogram": []}])
    assert chart["bars"] == []


def test_heat_levels_are_zero_for_an_empty_cell_and_the_top_level_for_the_largest():
    assert heat_level(0, 100) == 0
    assert heat_level(1, 1) == HEAT_LEVELS
    assert heat_level(100, 100) == HEAT_LEVELS
    assert heat_level(1, 100) == 1
    assert 1 < heat_level(10, 100) < HEAT_LEVELS


def test_a_heat_map_covers_the_statuses_present_and_links_only_changed_cells():
    cells = [
        {"previous": "no_problem", "current": "no_problem", "count": 50, "regression": False},
        {"previous": "no_problem", "current": "error", "count": 3, "regression": True},
    ]
    heat = heat_map(cells, "previous", "current", lambda row, column: f"/{row}/{column}")
    assert heat["statuses"] == ["no_problem", "error"]
    (same, changed), (empty, _) = (row["cells"] for row in heat["rows"])
    assert same["same"] and same["href"] is None
    assert changed["href"] == "/no_problem/error" and changed["regression"]
    assert changed["level"] == HEAT_LEVELS  # the largest changed cell, whatever the diagonal holds
    assert empty["count"] == 0 and empty["level"] == 0 and empty["href"] is None


def test_heat_cells_are_of_their_kind_fixes_regressions_other_changes_and_the_unchanged():
    assert heat_kind("error", "no_problem", False) == "fix"
    assert heat_kind("fatal", "warning", False) == "fix"
    assert heat_kind("no_problem", "error", True) == "regression"
    assert heat_kind("todo", "no_problem", False) == "change"  # not both completed: neither better nor worse
    assert heat_kind("absent", "error", False) == "change"
    assert heat_kind("warning", "warning", False) == "same"


def test_a_count_axis_ticks_round_numbers_from_zero_to_the_peak_at_their_heights():
    axis = count_axis(37, STAGE_CHART, "tasks")
    assert [tick["value"] for tick in axis["ticks"]] == [0, 10, 20, 30]
    floor, plot = STAGE_CHART["axis_y"], STAGE_CHART["plot"]
    assert axis["ticks"][0]["y"] == floor
    assert axis["ticks"][3]["y"] == round(floor - plot * 30 / 37, 2)
    assert axis["top"] == floor - plot and axis["view_box"].startswith("-")
    assert [tick["value"] for tick in count_axis(1, STAGE_CHART, "tasks")["ticks"]] == [0, 1]
    assert [tick["value"] for tick in count_axis(3, STAGE_CHART, "tasks")["ticks"]] == [0, 1, 2, 3]
    assert [tick["value"] for tick in count_axis(0, STAGE_CHART, "tasks")["ticks"]] == [0, 1]
    assert [tick["value"] for tick in count_axis(5000, STAGE_CHART, "tasks")["ticks"]] == [0, 2000, 4000]


def test_the_history_strip_puts_the_oldest_snapshot_left_and_the_live_state_as_now():
    entries = [
        {"live": True, "taken_at": None, "status": "error"},
        {"live": False, "taken_at": "2026-03-01T10:00:00Z", "status": "no_problem"},
    ]
    strip = history_strip(entries)
    oldest, now = strip["cells"]
    assert oldest["label"] == "03-01" and oldest["title"] == "2026-03-01 10:00:00: no_problem"
    assert now["label"] == "now" and now["status"] == "error"
    assert now["x"] == STRIP["cell_max"]  # two cells fit at their widest
