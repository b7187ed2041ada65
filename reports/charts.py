"""SVG geometry of the report screens: the runtime histogram's bars and their labels, from the runtime
report's DTO, drawn by config/charts.py. Sizes are SVG attributes, not styles, so the pages keep a strict
Content-Security-Policy."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from config.charts import Count, Frame, Spacing, bar_chart, count_axis
from config.screens import duration_ms_text
from corpora.queries.reports import RUNTIME_BUCKETS_MS

# The runtime histogram of a service (GET /api/services/<service>/runtimes): a bar per fixed bucket.
RUNTIME_CHART = {"width": 760, "height": 220, "top": 20, "plot": 160, "axis_y": 180, "label_y": 200}
RUNTIME_SPACING = Spacing(inset=0.15, fill=0.7)


def _peak(histogram: list[dict[str, Any]]) -> int:
    """The count the tallest bar stands for (1 when every bucket is empty)."""
    return max((bucket["count"] for bucket in histogram), default=0) or 1


def histogram_axis(histogram: list[dict[str, Any]]) -> dict[str, Any]:
    """The histogram's count axis (config.charts.count_axis), on the scale of histogram_bars."""
    return asdict(count_axis(_peak(histogram), Frame.of(RUNTIME_CHART), "conversions"))


def histogram_bars(histogram: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Bar geometry of the histogram's inline SVG: heights proportional to the counts, each bar's count above it."""
    counts = [Count(index, bucket["count"]) for index, bucket in enumerate(histogram)]
    chart = bar_chart(counts, len(histogram), Frame.of(RUNTIME_CHART), RUNTIME_SPACING)
    bars = []
    for index, (bar, bucket) in enumerate(zip(chart.bars, histogram, strict=True)):
        lower = RUNTIME_BUCKETS_MS[index - 1] if index else None
        bound = f"< {duration_ms_text(bucket['lt_ms'])}" if bucket["lt_ms"] is not None else None
        # The top edge from the rounded height, so that the bar meets the axis exactly.
        top = RUNTIME_CHART["axis_y"] - bar.height
        label = bound or f"≥ {duration_ms_text(lower)}"
        bars.append(asdict(bar) | {"y": round(top, 2), "count_y": round(top - 4, 2), "label": label})
    return bars
