"""SVG geometry of the run screens: their records turned into the inputs of config/charts.py, which draws
every chart, and its bars, cells and labels turned into what the templates read (with the run, minute or
histogram row each bar stands for). Sizes are SVG attributes, not styles, so the pages keep a strict
Content-Security-Policy; the templates only draw what these return."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict
from datetime import datetime
from typing import Any

from config import charts
from config.charts import HEAT_LEVELS as HEAT_LEVELS
from config.charts import Count, Frame, Spacing, Stack, bar_chart, columns, heat_level, stacked_chart
from corpora.statuses import DIFF_STATUSES, OVERVIEW_ORDER, improved
from corpora.telemetry import BINS_PER_OCTAVE

# The tallies chart: one stacked bar per run, oldest on the left; sizes are SVG attributes (CSP).
CHART = {"width": 760, "height": 240, "top": 14, "plot": 186, "axis_y": 200, "label_y": 218, "slot_max": 80}
RUN_SPACING = Spacing(inset=0.15, fill=0.7)
# The telemetry charts (SVG attributes, CSP): throughput per minute, and a histogram per stage.
THROUGHPUT_CHART = {"width": 760, "height": 160, "top": 14, "plot": 116, "axis_y": 130, "label_y": 148}
THROUGHPUT_SPACING = Spacing(inset=0.1, fill=0.8, narrowest=0.5)
STAGE_CHART = {"width": 360, "height": 130, "top": 12, "plot": 90, "axis_y": 102, "label_y": 120}
STAGE_SPACING = Spacing(inset=0.1, fill=0.8)


def run_chart(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Geometry of the tallies chart: per run (oldest first) a stack of its per-status counts, no_problem at the
    bottom, bars scaled to the largest total."""
    shown = [run for run in reversed(runs) if run["tallies"]]
    stacks = [Stack.of(run["tallies"], OVERVIEW_ORDER) for run in shown]
    chart = stacked_chart(stacks, Frame.of(CHART), RUN_SPACING, widest=CHART["slot_max"])
    bars = [
        asdict(bar) | {"run": run, "label": run["started_at"][5:16].replace("T", " ") if bar.labelled else ""}
        for bar, run in zip(chart.bars, shown, strict=True)
    ]
    return {"size": CHART, "bars": bars, "peak": chart.peak, "statuses": OVERVIEW_ORDER}


def throughput_chart(minutes: list[dict[str, Any]]) -> dict[str, Any]:
    """Geometry of the throughput chart: a bar per minute of the open run from its first minute with a
    result to its last (minutes with none stay empty), scaled to the busiest minute."""
    size = THROUGHPUT_CHART
    if not minutes:
        return {"size": size, "bars": [], "peak": 0}
    stamps = [datetime.fromisoformat(point["minute"]) for point in minutes]
    slots = [round((stamp - stamps[0]).total_seconds() / 60) for stamp in stamps]
    counts = [Count(slot, point["completed"]) for slot, point in zip(slots, minutes, strict=True)]
    chart = bar_chart(counts, slots[-1] + 1, Frame.of(size), THROUGHPUT_SPACING)
    bars = [
        asdict(bar) | {"point": point, "label": point["minute"][11:16] if bar.labelled else ""}
        for bar, point in zip(chart.bars, minutes, strict=True)
    ]
    return {"size": size, "bars": bars, "peak": chart.peak}


def count_axis(peak: int, size: dict[str, int], label: str) -> dict[str, Any]:
    """The count axis of a histogram whose tallest bar (`peak`) fills `size`'s plot (config.charts.count_axis)."""
    return asdict(charts.count_axis(peak, Frame.of(size), label))


def stage_charts(stages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Geometry of each stage's histogram: a slot per log-scale bin from the shortest non-empty one to
    the longest, so that the x axis stays logarithmic; bars scaled to the fullest bin."""
    size = STAGE_CHART
    drawn = []
    for stage in stages:
        histogram, bars, peak = stage["histogram"], [], 0
        if histogram:
            # A bin's upper bound is 2^((b + 1) / 4) ms (corpora.telemetry.bin_bounds).
            indices = [round(math.log2(row["to_ms"]) * BINS_PER_OCTAVE) - 1 for row in histogram]
            counts = [Count(index - indices[0], row["count"]) for row, index in zip(histogram, indices, strict=True)]
            chart = bar_chart(counts, indices[-1] - indices[0] + 1, Frame.of(size), STAGE_SPACING)
            bars = [asdict(bar) | {"row": row} for bar, row in zip(chart.bars, histogram, strict=True)]
            peak = chart.peak
        drawn.append(
            {
                "stage": stage,
                "size": size,
                "bars": bars,
                "axis": count_axis(peak, size, "tasks"),
                "title": stage["stage"].replace("_", " "),
            }
        )
    return drawn


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
STRIP_SPACING = Spacing(inset=0, fill=1, gap=2)  # ints, so that a cell of whole units keeps an int size


def history_strip(entries: list[dict[str, Any]]) -> dict[str, Any]:
    """Geometry of the status strip: a cell per snapshot (and the live state), oldest first, coloured by
    the status then."""
    shown = list(reversed(entries))
    places = columns(len(shown), STRIP["width"], STRIP_SPACING, widest=STRIP["cell_max"])
    cells = [
        {
            "x": place.x,
            "width": place.width,
            "center": place.center,
            "status": entry["status"],
            "title": f"{'now' if entry['live'] else entry['taken_at'][:19].replace('T', ' ')}: {entry['status']}",
            "label": ("now" if entry["live"] else entry["taken_at"][5:10]) if place.labelled else "",
        }
        for place, entry in zip(places, shown, strict=True)
    ]
    return {"size": STRIP, "cells": cells}
