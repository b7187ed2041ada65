"""SVG geometry of the run screens: pure functions from the DTOs the screens show to the sizes and
positions of their bars, cells and labels. Sizes are SVG attributes, not styles, so the pages keep a
strict Content-Security-Policy; the templates only draw what these return."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from django.utils.dateparse import parse_datetime

from corpora.statuses import DIFF_STATUSES, OVERVIEW_ORDER, improved
from corpora.telemetry import BINS_PER_OCTAVE

# The tallies chart: one stacked bar per run, oldest on the left; sizes are SVG attributes (CSP).
CHART = {"width": 760, "height": 240, "top": 14, "plot": 186, "axis_y": 200, "label_y": 218, "slot_max": 80}
CHART_LABELS = 8  # at most this many run dates under the bars
HEAT_LEVELS = 5
# The telemetry charts (SVG attributes, CSP): throughput per minute, and a histogram per stage.
THROUGHPUT_CHART = {"width": 760, "height": 160, "top": 14, "plot": 116, "axis_y": 130, "label_y": 148}
STAGE_CHART = {"width": 360, "height": 130, "top": 12, "plot": 90, "axis_y": 102, "label_y": 120}
# A histogram's count axis: at most this many steps between round numbers, in a gutter left of the plot.
AXIS_STEPS = 4
AXIS_GUTTER = 48


def run_chart(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Geometry of the tallies chart: per run (oldest first) a stack of its per-status counts, bars
    scaled to the largest total."""
    shown = [run for run in reversed(runs) if run["tallies"]]
    slot = min(CHART["width"] / max(len(shown), 1), CHART["slot_max"])
    peak = max((run["tallies"]["total"] for run in shown), default=0) or 1
    every = math.ceil(len(shown) / CHART_LABELS) or 1
    bars = []
    for index, run in enumerate(shown):
        top, segments = CHART["top"] + CHART["plot"], []
        for key in OVERVIEW_ORDER:  # no_problem at the bottom
            count = run["tallies"][key]
            if count:
                height = CHART["plot"] * count / peak
                top -= height
                segments.append({"key": key, "count": count, "y": round(top, 2), "height": round(height, 2)})
        bars.append(
            {
                "run": run,
                "x": round(index * slot + slot * 0.15, 2),
                "width": round(slot * 0.7, 2),
                "center": round(index * slot + slot / 2, 2),
                "segments": segments,
                "label": run["started_at"][5:16].replace("T", " ") if index % every == 0 else "",
            }
        )
    return {"size": CHART, "bars": bars, "peak": peak, "statuses": OVERVIEW_ORDER}


def throughput_chart(minutes: list[dict[str, Any]]) -> dict[str, Any]:
    """Geometry of the throughput chart: a bar per minute of the open run from its first minute with a
    result to its last (minutes with none stay empty), scaled to the busiest minute."""
    size = THROUGHPUT_CHART
    if not minutes:
        return {"size": size, "bars": [], "peak": 0}
    stamps = [parse_datetime(point["minute"]) for point in minutes]
    first = stamps[0]
    span = round((stamps[-1] - first).total_seconds() / 60) + 1
    slot = size["width"] / span
    peak = max(point["completed"] for point in minutes) or 1
    every = math.ceil(span / CHART_LABELS) or 1
    bars = []
    for point, stamp in zip(minutes, stamps, strict=True):
        index = round((stamp - first).total_seconds() / 60)
        height = size["plot"] * point["completed"] / peak
        bars.append(
            {
                "point": point,
                "x": round(index * slot + slot * 0.1, 2),
                "width": round(max(slot * 0.8, 0.5), 2),
                "y": round(size["axis_y"] - height, 2),
                "height": round(height, 2),
                "label": point["minute"][11:16] if index % every == 0 else "",
                "center": round(index * slot + slot / 2, 2),
            }
        )
    return {"size": size, "bars": bars, "peak": peak}


def count_axis(peak: int, size: dict[str, int], label: str) -> dict[str, Any]:
    """The count axis of a histogram whose tallest bar (`peak`) fills `size`'s plot: ticks at round numbers
    from 0 up to the peak, each at its height; the SVG's view box widened by a gutter on the left for
    their labels (the bars keep their coordinates); and the axis's title, turned upright along it."""
    peak = max(peak, 1)
    raw = peak / AXIS_STEPS
    magnitude = 10 ** math.floor(math.log10(raw))
    step = max(1, math.ceil(next(m * magnitude for m in (1, 2, 5, 10) if m * magnitude >= raw)))
    heights = {value: round(size["axis_y"] - size["plot"] * value / peak, 2) for value in range(0, peak + 1, step)}
    ticks = [{"value": value, "y": y} for value, y in heights.items()]
    return {
        "ticks": ticks,
        "view_box": f"{-AXIS_GUTTER} 0 {size['width'] + AXIS_GUTTER} {size['height']}",
        "top": size["axis_y"] - size["plot"],
        # rotate(-90) maps (x, y) to (y, -x): the title's centre sits at the plot's mid-height, near the left edge.
        "label": label,
        "label_x": -round(size["axis_y"] - size["plot"] / 2, 2),
        "label_y": -AXIS_GUTTER + 12,
    }


def stage_charts(stages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Geometry of each stage's histogram: a slot per log-scale bin from the shortest non-empty one to
    the longest, so that the x axis stays logarithmic; bars scaled to the fullest bin."""
    size = STAGE_CHART
    charts = []
    for stage in stages:
        histogram, bars, peak = stage["histogram"], [], 0
        if histogram:
            # A bin's upper bound is 2^((b + 1) / 4) ms (corpora.telemetry.bin_bounds).
            indices = [round(math.log2(row["to_ms"]) * BINS_PER_OCTAVE) - 1 for row in histogram]
            slot = size["width"] / (indices[-1] - indices[0] + 1)
            peak = max(row["count"] for row in histogram)
            for row, index in zip(histogram, indices, strict=True):
                height = size["plot"] * row["count"] / peak
                offset = (index - indices[0]) * slot
                bars.append(
                    {
                        "row": row,
                        "x": round(offset + slot * 0.1, 2),
                        "width": round(slot * 0.8, 2),
                        "y": round(size["axis_y"] - height, 2),
                        "height": round(height, 2),
                    }
                )
        charts.append(
            {
                "stage": stage,
                "size": size,
                "bars": bars,
                "axis": count_axis(peak, size, "tasks"),
                "title": stage["stage"].replace("_", " "),
            }
        )
    return charts


def heat_level(count: int, peak: int) -> int:
    """0 for an empty cell, else 1..HEAT_LEVELS on a log scale up to the largest changed cell."""
    if count == 0:
        return 0
    if peak <= 1:
        return HEAT_LEVELS
    return 1 + round((HEAT_LEVELS - 1) * math.log(count) / math.log(peak))


def heat_kind(row: str, column: str, regression: bool) -> str:
    """The colour family of a heat-map cell: unchanged (the diagonal), a regression (worse), a fix (better,
    between two completed statuses) or another change (to or from TODO, blocked, absent...)."""
    if row == column:
        return "same"
    if regression:
        return "regression"
    return "fix" if improved(row, column) else "change"


def heat_map(
    cells: list[dict[str, Any]], row_key: str, column_key: str, href: Callable[[str, str], str]
) -> dict[str, Any]:
    """A matrix DTO as a square table over the statuses it holds. The diagonal (unchanged) is shaded
    apart; every other non-empty cell is coloured by its kind (heat_kind), shaded by its count, links to
    `href(row, column)` and is marked when it is a regression."""
    by_pair = {(cell[row_key], cell[column_key]): cell for cell in cells}
    present = {cell[row_key] for cell in cells} | {cell[column_key] for cell in cells}
    statuses = [status for status in DIFF_STATUSES if status in present]
    peak = max((cell["count"] for cell in cells if cell[row_key] != cell[column_key]), default=0)
    rows = []
    for row in statuses:
        line = []
        for column in statuses:
            cell = by_pair.get((row, column))
            count, same = (cell["count"] if cell else 0), row == column
            regression = bool(cell and cell["regression"])
            line.append(
                {
                    "row": row,
                    "column": column,
                    "count": count,
                    "same": same,
                    "level": heat_level(count, peak),
                    "regression": regression,
                    "kind": heat_kind(row, column, regression),
                    "href": href(row, column) if count and not same else None,
                }
            )
        rows.append({"status": row, "cells": line})
    return {"statuses": statuses, "rows": rows}


# The status strip of a document's history: one cell per entry, oldest on the left; sizes are SVG attributes.
STRIP = {"width": 760, "height": 56, "cell_max": 60, "bar": 28, "label_y": 48}


def history_strip(entries: list[dict[str, Any]]) -> dict[str, Any]:
    """Geometry of the status strip: a cell per snapshot (and the live state), oldest first, coloured by
    the status then."""
    shown = list(reversed(entries))
    cell = min(STRIP["width"] / max(len(shown), 1), STRIP["cell_max"])
    every = math.ceil(len(shown) / CHART_LABELS) or 1
    cells = [
        {
            "x": round(index * cell, 2),
            "width": round(cell - 2, 2),
            "center": round(index * cell + cell / 2, 2),
            "status": entry["status"],
            "title": f"{'now' if entry['live'] else entry['taken_at'][:19].replace('T', ' ')}: {entry['status']}",
            "label": ("now" if entry["live"] else entry["taken_at"][5:10]) if index % every == 0 else "",
        }
        for index, entry in enumerate(shown)
    ]
    return {"size": STRIP, "cells": cells}
