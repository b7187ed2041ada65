"""SVG geometry of the report screens: the runtime histogram's bars and their labels, from the runtime
report's DTO. Sizes are SVG attributes, not styles, so the pages keep a strict Content-Security-Policy."""

from __future__ import annotations

from typing import Any

from config.screens import duration_ms_text
from corpora.queries.reports import RUNTIME_BUCKETS_MS
from runs.charts import count_axis

# The runtime histogram of a service (GET /api/services/<service>/runtimes): a bar per fixed bucket.
RUNTIME_CHART = {"width": 760, "height": 220, "top": 20, "plot": 160, "axis_y": 180, "label_y": 200}


def _peak(histogram: list[dict[str, Any]]) -> int:
    """The count the tallest bar stands for (1 when every bucket is empty)."""
    return max((bucket["count"] for bucket in histogram), default=0) or 1


def histogram_axis(histogram: list[dict[str, Any]]) -> dict[str, Any]:
    """The histogram's count axis (runs.charts.count_axis), on the scale of histogram_bars."""
    return count_axis(_peak(histogram), RUNTIME_CHART, "conversions")


def histogram_bars(histogram: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Bar geometry of the histogram's inline SVG: heights proportional to the counts."""
    slot = RUNTIME_CHART["width"] / len(histogram)
    peak = _peak(histogram)
    bars = []
    for index, bucket in enumerate(histogram):
        height = round(RUNTIME_CHART["plot"] * bucket["count"] / peak, 2)
        lower = RUNTIME_BUCKETS_MS[index - 1] if index else None
        bound = f"< {duration_ms_text(bucket['lt_ms'])}" if bucket["lt_ms"] is not None else None
        label = bound or f"≥ {duration_ms_text(lower)}"
        bars.append(
            {
                "x": round(index * slot + slot * 0.15, 2),
                "y": round(RUNTIME_CHART["top"] + RUNTIME_CHART["plot"] - height, 2),
                "width": round(slot * 0.7, 2),
                "height": height,
                "center": round(index * slot + slot / 2, 2),
                "count_y": round(RUNTIME_CHART["top"] + RUNTIME_CHART["plot"] - height - 4, 2),
                "count": bucket["count"],
                "label": label,
            }
        )
    return bars
