"""Reads of a run's telemetry (written by corpora.telemetry): per stage the percentiles and histogram of
the open run and of the latest closed one, the open run's throughput per minute, and its ETA.

Percentiles are nearest-rank over the bins: the bin holding the ceil(p * n)-th smallest duration, given
as its geometric middle with its bounds, so within a factor 2^(1/8) (±9%) of the exact value.
The ETA is corpora.queries.eta's.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from corpora.choices import TIMED_STAGES
from corpora.models import Run, TelemetryBin, TelemetryMinute
from corpora.queries.corpora import Pair
from corpora.queries.eta import RATE_WINDOW, Eta, run_etas
from corpora.queries.history import pair_known
from corpora.telemetry import BINS_PER_OCTAVE, bin_bounds, bin_middle

PERCENTILES = (("p50", 0.50), ("p90", 0.90), ("p99", 0.99))
PRECISION = (
    f"durations in milliseconds; percentiles are nearest-rank over log-scale bins ({BINS_PER_OCTAVE} per doubling),"
    " given as the bin's geometric middle, within a factor 2^(1/8) (about 9%) of the exact value"
)


def percentile_bin(bins: list[tuple[int, int]], fraction: float) -> int | None:
    """The bin holding the nearest-rank `fraction` percentile of (bin, count) rows, or None when empty."""
    total = sum(count for _, count in bins)
    if total <= 0:
        return None
    rank = max(1, math.ceil(fraction * total))
    seen = 0
    for bin_, count in sorted(bins):
        seen += count
        if seen >= rank:
            return bin_
    return None  # pragma: no cover  (seen reaches total >= rank)


@dataclass(frozen=True)
class Percentile:
    """A percentile as the bin that holds it: its geometric middle and its bounds (PercentileSerializer)."""

    ms: float
    from_ms: float
    to_ms: float


@dataclass(frozen=True)
class HistogramBin:
    from_ms: float
    to_ms: float
    count: int


@dataclass(frozen=True)
class StageSummary:
    """One stage of a run: its count, percentiles and histogram (StageSerializer)."""

    stage: str
    count: int
    p50: Percentile | None
    p90: Percentile | None
    p99: Percentile | None
    histogram: list[HistogramBin]


@dataclass(frozen=True)
class ThroughputMinute:
    minute: datetime
    completed: int


def bin_point(bin_: int, unit: float = 1.0) -> tuple[float, float, float]:
    """A bin as its geometric middle and its bounds, in `unit`s of what it counts, to 3 decimals."""
    low, high = bin_bounds(bin_)
    return round(bin_middle(bin_) / unit, 3), round(low / unit, 3), round(high / unit, 3)


def _percentile(bins: list[tuple[int, int]], fraction: float) -> Percentile | None:
    found = percentile_bin(bins, fraction)
    return None if found is None else Percentile(*bin_point(found))


def stage_summary(stage: str, bins: list[tuple[int, int]]) -> StageSummary:
    """One stage's DTO: its count, percentiles and histogram (non-empty bins, shortest first)."""
    rows = sorted((b, c) for b, c in bins if c > 0)
    percentiles = {name: _percentile(rows, fraction) for name, fraction in PERCENTILES}
    histogram = [HistogramBin(*bin_point(b)[1:], c) for b, c in rows]
    return StageSummary(stage=stage, count=sum(c for _, c in rows), **percentiles, histogram=histogram)


def run_stages(run_ids: list[int]) -> dict[int, list[StageSummary]]:
    """Every timed stage's summary for each of these runs (stages with no count included), in one read."""
    by_run: dict[int, dict[int, list[tuple[int, int]]]] = defaultdict(lambda: defaultdict(list))
    rows = TelemetryBin.objects.filter(run_id__in=run_ids, stage__in=TIMED_STAGES)
    for run_id, stage, bin_, count in rows.values_list("run_id", "stage", "bin", "count"):
        by_run[run_id][stage].append((bin_, count))
    return {run_id: [stage_summary(stage.label, by_run[run_id][stage]) for stage in TIMED_STAGES] for run_id in run_ids}


def run_throughput(run_id: int) -> list[ThroughputMinute]:
    """Results applied per minute of a run, oldest first (minutes with none are absent)."""
    rows = TelemetryMinute.objects.filter(run_id=run_id).order_by("minute").values_list("minute", "count")
    return [ThroughputMinute(minute, count) for minute, count in rows]


_RUN_FIELDS = ("id", "corpus_id", "service_id", "started_at", "finished_at")


@dataclass(frozen=True)
class TelemetryRun:
    """A run's stage summaries (stage_summary), every stage included (TelemetryRunSerializer)."""

    id: int
    started_at: datetime
    finished_at: datetime | None
    stages: list[StageSummary]


@dataclass(frozen=True)
class Telemetry:
    """A pair's telemetry: the open and the last closed run's stages, the open run's throughput per minute
    and its ETA (TelemetrySerializer)."""

    corpus: str
    service: str
    precision: str
    open_run: TelemetryRun | None
    last_closed_run: TelemetryRun | None
    throughput: list[ThroughputMinute]
    eta: Eta | None
    rate_window: str


def pair_telemetry(pair: Pair, now: datetime | None = None) -> Telemetry:
    """GET /api/runs/{corpus}/{service}/telemetry."""
    pair_known(pair)
    runs = Run.objects.filter(corpus_id=pair.corpus_id, service_id=pair.service_id)
    open_run = runs.filter(finished_at__isnull=True).values(*_RUN_FIELDS).first()
    closed = runs.filter(finished_at__isnull=False).order_by("-finished_at", "-id").values(*_RUN_FIELDS).first()
    stages = run_stages([run["id"] for run in (open_run, closed) if run])

    def record(run: dict[str, Any] | None) -> TelemetryRun | None:
        if run is None:
            return None
        return TelemetryRun(run["id"], run["started_at"], run["finished_at"], stages[run["id"]])

    return Telemetry(
        corpus=pair.corpus_name,
        service=pair.service_name,
        precision=PRECISION,
        open_run=record(open_run),
        last_closed_run=record(closed),
        throughput=run_throughput(open_run["id"]) if open_run else [],
        eta=run_etas([open_run], now)[open_run["id"]] if open_run else None,
        rate_window=RATE_WINDOW,
    )
