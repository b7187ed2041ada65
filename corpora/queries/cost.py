"""Reads of a run's cost (written by corpora.telemetry, docs/decisions/cost-and-schedule.md): for the open
run and the latest closed one, the CPU time of all its conversions, papers per core-hour, the distribution
of their peak resident memory, and what the pair's whole corpus and arXiv would cost at that rate.

CPU time is exact (summed per minute of the run); peak memory is counted in the telemetry's log-scale bins,
so its percentiles are within ±9%, as the stage times' are."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import Sum

from corpora.choices import Stage
from corpora.models import Run, TaskCount, TelemetryBin, TelemetryMinute
from corpora.queries.corpora import Pair
from corpora.queries.history import pair_known
from corpora.queries.telemetry import PERCENTILES, bin_point, percentile_bin
from corpora.telemetry import BINS_PER_OCTAVE

# arXiv's size, in papers, for the projection beside the corpus's own: the corpus a full run of the
# service is meant for (the real set in ../shared is a sample of it).
ARXIV_PAPERS = 2_800_000
PRECISION = (
    "CPU time is the user and system time of each conversion's processes together, as its worker measured it,"
    " summed exactly; peak memory is the largest resident size of a conversion's processes together, sampled"
    f" every quarter second, in MiB; its percentiles are nearest-rank over log-scale bins ({BINS_PER_OCTAVE} per"
    " doubling), within about 9%; projections assume the corpus's papers cost what the run's measured ones did"
)
_MIB = 1024.0  # the bins count KiB


@dataclass(frozen=True)
class MemoryPercentile:
    """A percentile of peak memory as the bin that holds it: its geometric middle and bounds, MiB."""

    mib: float
    from_mib: float
    to_mib: float


@dataclass(frozen=True)
class MemoryBin:
    from_mib: float
    to_mib: float
    count: int


@dataclass(frozen=True)
class PeakMemory:
    """The distribution of the peak memory of a run's measured conversions."""

    count: int
    p50: MemoryPercentile | None
    p90: MemoryPercentile | None
    p99: MemoryPercentile | None
    max: MemoryPercentile | None
    histogram: list[MemoryBin]


@dataclass(frozen=True)
class Projection:
    """What `papers` would take at the run's CPU time per paper, in core-hours."""

    papers: int
    core_hours: float | None


@dataclass(frozen=True)
class Projections:
    """The pair's whole corpus (its tasks) and arXiv at the run's rate."""

    corpus: Projection
    arxiv: Projection


@dataclass(frozen=True)
class RunCost:
    """One run's cost (RunCostSerializer)."""

    id: int
    started_at: datetime
    finished_at: datetime | None
    results: int
    measured: int
    cpu_seconds: float
    cpu_seconds_per_paper: float | None
    papers_per_core_hour: float | None
    peak_memory: PeakMemory
    projections: Projections


@dataclass(frozen=True)
class Cost:
    """A pair's cost: the open and the last closed run's (CostSerializer)."""

    corpus: str
    service: str
    precision: str
    open_run: RunCost | None
    last_closed_run: RunCost | None


def _memory_percentile(bin_: int | None) -> MemoryPercentile | None:
    return None if bin_ is None else MemoryPercentile(*bin_point(bin_, _MIB))


def peak_memory(bins: list[tuple[int, int]]) -> PeakMemory:
    """The peak-memory DTO of (bin, count) rows."""
    rows = sorted((b, c) for b, c in bins if c > 0)
    percentiles = {name: _memory_percentile(percentile_bin(rows, fraction)) for name, fraction in PERCENTILES}
    histogram = [MemoryBin(*bin_point(b, _MIB)[1:], c) for b, c in rows]
    top = _memory_percentile(rows[-1][0]) if rows else None
    return PeakMemory(count=sum(c for _, c in rows), **percentiles, max=top, histogram=histogram)


def run_cost(
    run: Mapping[str, Any], *, minutes: Mapping[str, Any], bins: list[tuple[int, int]], corpus_papers: int
) -> RunCost:
    """One run's DTO from its minutes' sums (results, cpu_ms, cpu_results) and its peak-memory bins."""
    results, cpu_ms, measured = (minutes.get(key) or 0 for key in ("results", "cpu_ms", "cpu_results"))
    per_paper = cpu_ms / 1000 / measured if measured else None
    per_core_hour = 3600 / per_paper if per_paper else None
    projections = Projections(
        *(
            Projection(papers, round(papers * per_paper / 3600, 3) if per_paper is not None else None)
            for papers in (corpus_papers, ARXIV_PAPERS)
        )
    )
    return RunCost(
        id=run["id"], started_at=run["started_at"], finished_at=run["finished_at"], results=results,
        measured=measured, cpu_seconds=round(cpu_ms / 1000, 3),
        cpu_seconds_per_paper=round(per_paper, 3) if per_paper is not None else None,
        papers_per_core_hour=round(per_core_hour, 1) if per_core_hour is not None else None,
        peak_memory=peak_memory(bins), projections=projections,
    )  # fmt: skip


_RUN_FIELDS = ("id", "started_at", "finished_at")


def pair_cost(pair: Pair) -> Cost:
    """GET /api/runs/{corpus}/{service}/cost."""
    pair_known(pair)
    runs = Run.objects.filter(corpus_id=pair.corpus_id, service_id=pair.service_id)
    open_run = runs.filter(finished_at__isnull=True).values(*_RUN_FIELDS).first()
    closed = runs.filter(finished_at__isnull=False).order_by("-finished_at", "-id").values(*_RUN_FIELDS).first()
    run_ids = [run["id"] for run in (open_run, closed) if run]
    minutes = {
        row["run_id"]: row
        for row in TelemetryMinute.objects.filter(run_id__in=run_ids)
        .values("run_id")
        .annotate(results=Sum("count"), cpu_ms=Sum("cpu_ms"), cpu_results=Sum("cpu_results"))
    }
    bins: dict[int, list[tuple[int, int]]] = {run_id: [] for run_id in run_ids}
    for run_id, bin_, count in TelemetryBin.objects.filter(run_id__in=run_ids, stage=Stage.PEAK_MEMORY).values_list(
        "run_id", "bin", "count"
    ):
        bins[run_id].append((bin_, count))
    papers = TaskCount.objects.filter(corpus_id=pair.corpus_id, service_id=pair.service_id).aggregate(n=Sum("count"))
    corpus_papers = papers["n"] or 0

    def record(run: Mapping[str, Any] | None) -> RunCost | None:
        if run is None:
            return None
        return run_cost(run, minutes=minutes.get(run["id"], {}), bins=bins[run["id"]], corpus_papers=corpus_papers)

    return Cost(
        corpus=pair.corpus_name,
        service=pair.service_name,
        precision=PRECISION,
        open_run=record(open_run),
        last_closed_run=record(closed),
    )
