"""The runtime histogram's SVG geometry (reports.charts): a pure function of the runtime report's DTO."""

from __future__ import annotations

from corpora.queries.reports import RUNTIME_BUCKETS_MS
from reports.charts import RUNTIME_CHART, histogram_axis, histogram_bars


def test_the_fullest_bucket_fills_the_plot_and_the_open_bucket_is_labelled_from_below():
    histogram = [{"lt_ms": bound, "count": 0} for bound in RUNTIME_BUCKETS_MS] + [{"lt_ms": None, "count": 0}]
    histogram[0]["count"], histogram[-1]["count"] = 4, 2
    bars = histogram_bars(histogram)
    assert len(bars) == len(histogram)
    assert bars[0]["height"] == RUNTIME_CHART["plot"] and bars[0]["y"] == RUNTIME_CHART["top"]
    assert bars[-1]["height"] == RUNTIME_CHART["plot"] / 2
    assert bars[1]["height"] == 0
    assert bars[0]["label"] == "< 100 ms"
    assert bars[-1]["label"] == "≥ 5 min"
    # The count axis is on the bars' scale: its top tick (4) stands where the fullest bar's top is.
    ticks = histogram_axis(histogram)["ticks"]
    assert [tick["value"] for tick in ticks] == [0, 1, 2, 3, 4]
    assert ticks[-1]["y"] == bars[0]["y"] and ticks[2]["y"] == bars[-1]["y"]


def test_a_histogram_with_no_conversions_has_flat_bars():
    bars = histogram_bars([{"lt_ms": 100, "count": 0}, {"lt_ms": None, "count": 0}])
    assert [bar["height"] for bar in bars] == [0, 0]
