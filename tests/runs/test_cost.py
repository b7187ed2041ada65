"""A run's cost against exact values: the applying transaction sums the results' CPU time per minute and
counts their peak memory into the telemetry's bins, and the cost query, its API and its screen read back
the CPU seconds, papers per core-hour, the peak memory's nearest-rank percentiles and the projections."""

from __future__ import annotations

import math

import pytest
from django.db import connection, transaction

from conversion.choices import TaskStatus
from corpora.choices import Stage
from corpora.models import Run, TelemetryBin, TelemetryMinute
from corpora.queries.corpora import pair_resolve
from corpora.queries.cost import ARXIV_PAPERS, pair_cost
from corpora.telemetry import duration_bin, results_record
from tests.corpora.helpers import activated, imported
from tests.runs.helpers import finish

pytestmark = pytest.mark.django_db

# Twelve results: ten measured (CPU ms, peak KiB), one with its CPU time alone, one unmeasured.
COSTS = [
    (2_000, 120_000), (3_000, 150_000), (4_000, 180_000), (5_000, 200_000), (6_000, 260_000),
    (8_000, 300_000), (9_000, 350_000), (12_000, 500_000), (20_000, 900_000), (31_000, 2_000_000),
    (1_000, None), (None, None),
]  # fmt: skip


@pytest.fixture
def pair(corpus_root):
    imported(corpus_root, "a", documents=12)
    activated("a")
    return Run.objects.get(corpus__name="a", service__name="tex_to_html", finished_at__isnull=True)


def _record(run: Run) -> None:
    now = run.started_at.timestamp() + 60
    rows = [(run.pk, now - 5, run.started_at.timestamp(), now - 1)] * len(COSTS)
    with transaction.atomic(), connection.cursor() as cursor:
        results_record(cursor, rows, costs=[(run.pk, cpu, peak) for cpu, peak in COSTS], applied=now)


def test_applied_results_sum_their_cpu_time_and_count_their_peak_memory_in_bins(pair):
    _record(pair)
    minute = TelemetryMinute.objects.get(run_id=pair.pk)
    cpu = [c for c, _ in COSTS if c is not None]
    assert (minute.count, minute.cpu_ms, minute.cpu_results) == (12, sum(cpu), len(cpu))
    peaks = [p for _, p in COSTS if p is not None]
    expected: dict[int, int] = {}
    for kib in peaks:
        expected[duration_bin(kib)] = expected.get(duration_bin(kib), 0) + 1
    assert dict(TelemetryBin.objects.filter(run_id=pair.pk, stage=Stage.PEAK_MEMORY).values_list("bin", "count")) == (
        expected
    )

    cost = pair_cost(pair_resolve("a", "tex_to_html"))
    run = cost.open_run
    assert cost.last_closed_run is None and run.id == pair.pk
    assert (run.results, run.measured, run.cpu_seconds) == (12, 11, sum(cpu) / 1000)
    per_paper = sum(cpu) / 1000 / len(cpu)
    assert run.cpu_seconds_per_paper == pytest.approx(per_paper, abs=1e-3)
    assert run.papers_per_core_hour == pytest.approx(3600 / per_paper, abs=0.05)
    ordered = sorted(peaks)
    for name, fraction in (("p50", 0.5), ("p90", 0.9), ("p99", 0.99)):
        exact = ordered[max(1, math.ceil(fraction * len(ordered))) - 1] / 1024
        found = getattr(run.peak_memory, name)
        assert found.from_mib <= exact < found.to_mib, (name, exact, found)
    assert run.peak_memory.max.from_mib <= max(peaks) / 1024 < run.peak_memory.max.to_mib
    assert run.peak_memory.count == len(peaks) == sum(b.count for b in run.peak_memory.histogram)
    assert run.projections.corpus.papers == 12  # the pair's tasks
    assert run.projections.corpus.core_hours == pytest.approx(round(12 * per_paper / 3600, 3))
    assert run.projections.arxiv.papers == ARXIV_PAPERS
    assert run.projections.arxiv.core_hours == pytest.approx(round(ARXIV_PAPERS * per_paper / 3600, 3))


def test_a_run_without_measured_results_has_no_rate_and_no_projection(pair):
    run = pair_cost(pair_resolve("a", "tex_to_html")).open_run
    assert (run.results, run.measured, run.cpu_seconds, run.papers_per_core_hour) == (0, 0, 0, None)
    assert run.peak_memory.count == 0 and run.peak_memory.p50 is None
    assert (run.projections.corpus.core_hours, run.projections.arxiv.core_hours) == (None, None)


def test_the_api_gives_the_open_and_the_last_closed_run_s_cost(api, pair):
    _record(pair)
    finish([TaskStatus.NO_PROBLEM] * 12)
    body = api.get("/api/runs/a/tex_to_html/cost").json()  # public
    assert body["open_run"] is None and body["last_closed_run"]["id"] == pair.pk
    closed = body["last_closed_run"]
    assert closed["cpu_seconds"] == 101.0 and closed["measured"] == 11
    assert closed["peak_memory"]["count"] == 10 and closed["peak_memory"]["p50"]["mib"] > 0
    assert closed["projections"]["corpus"]["papers"] == 12 and closed["projections"]["arxiv"]["core_hours"] > 0
    # The telemetry's stage table leaves peak memory to the cost.
    stages = api.get("/api/runs/a/tex_to_html/telemetry").json()["last_closed_run"]["stages"]
    assert "peak_memory" not in [s["stage"] for s in stages]
    assert api.get("/api/runs/a/nope/cost").status_code == 404
