"""A run's telemetry against exact values: the lease and the applying statements count known durations
into the bins that hold them, the percentiles and histogram read back equal the nearest-rank values of
those durations (to their bins), the throughput and the ETA equal what the inserted minutes say, and
only the open and latest closed runs of a pair keep their telemetry."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection, transaction
from django.utils import timezone

from conversion.choices import TaskStatus
from corpora.actions.reports import rerun
from corpora.choices import Stage
from corpora.models import Run, Task, TelemetryBin, TelemetryMinute
from corpora.pairs import data_purge, run_open
from corpora.queries.corpora import pair_resolve
from corpora.queries.eta import RECENT_MINUTES, run_etas
from corpora.queries.telemetry import pair_telemetry
from corpora.task_changes import lease_batch, leases_expire, leases_reap, tasks_pause, tasks_resume
from corpora.telemetry import (
    bin_bounds,
    bin_middle,
    duration_bin,
    results_record,
)
from tests.corpora.helpers import activated, imported
from tests.runs.helpers import finish

pytestmark = pytest.mark.django_db

MARK = 777_001


def _bins(run_id: int, stage: int) -> dict[int, int]:
    return dict(TelemetryBin.objects.filter(run_id=run_id, stage=stage).values_list("bin", "count"))


def _nearest_rank(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[max(1, math.ceil(fraction * len(ordered))) - 1]


@pytest.fixture
def pair(corpus_root):
    imported(corpus_root, "a", documents=12)
    activated("a")
    return Run.objects.get(corpus__name="a", service__name="tex_to_html", finished_at__isnull=True)


def test_a_bin_holds_the_durations_its_bounds_say():
    for ms in (0.0, 0.5, 1.0, 1.2, 3.0, 999.9, 1000.0, 3_600_000.0, 8.64e8):
        low, high = bin_bounds(duration_bin(ms))
        assert low <= ms < high
        assert bin_middle(duration_bin(ms)) / max(ms, 1.0) < 2 ** (1 / 8) + 1e-9
        assert max(ms, 1.0) / bin_middle(duration_bin(ms)) <= 2 ** (1 / 8) + 1e-9


def test_the_lease_counts_each_task_queue_wait_from_todo_since_or_the_run_start(pair):
    tasks = list(Task.objects.filter(corpus__name="a", service__name="tex_to_html").order_by("id"))
    with connection.cursor() as cursor:  # the lease measures from its transaction's now(): the test's
        cursor.execute("SELECT now()")
        now = cursor.fetchone()[0]
    Run.objects.filter(pk=pair.pk).update(started_at=now - timedelta(seconds=60))
    Task.objects.filter(pk__in=[t.pk for t in tasks[:4]]).update(todo_since=now - timedelta(seconds=3))
    leased = lease_batch(service_id=tasks[0].service_id, limit=len(tasks), mark=MARK, lease_seconds=600)
    assert len(leased) == len(tasks)
    assert _bins(pair.pk, Stage.QUEUE_WAIT) == {duration_bin(3000): 4, duration_bin(60_000): len(tasks) - 4}


def test_applied_results_count_their_stage_times_exactly_and_read_back_as_nearest_rank_percentiles(pair):
    tasks = list(Task.objects.filter(corpus__name="a", service__name="tex_to_html").order_by("id"))
    started = datetime(2026, 11, 26, 7, 0, tzinfo=UTC)
    Run.objects.filter(pk=pair.pk).update(started_at=started)
    leased_at = started.timestamp() + 3600
    applied = leased_at + 70.0
    conversions_ms = [5.0, 12.0, 12.5, 40.0, 90.0, 250.0, 251.0, 1_000.0, 4_000.0, 9_500.0, 60_000.0, 61_000.0]
    todo_since = [None] * 11 + [leased_at - 2.0]  # the last one reaped and TODO again 2 s before its lease
    rows = [
        (pair.pk, leased_at, since or started.timestamp(), leased_at + ms / 1000)
        for ms, since in zip(conversions_ms, todo_since, strict=True)
    ]
    with transaction.atomic(), connection.cursor() as cursor:
        results_record(cursor, rows, applied=applied)
    ingestions_ms = [1000 * (applied - arrived) for *_, arrived in rows]
    ends_ms = [1000 * (applied - since) for _, _, since, _ in rows]

    def counted(durations: list[float]) -> dict[int, int]:
        found: dict[int, int] = {}
        for ms in durations:
            found[duration_bin(ms)] = found.get(duration_bin(ms), 0) + 1
        return found

    expected_bins = counted(conversions_ms)
    assert _bins(pair.pk, Stage.CONVERSION) == expected_bins
    assert _bins(pair.pk, Stage.INGESTION) == counted(ingestions_ms)
    assert (
        _bins(pair.pk, Stage.END_TO_END) == counted(ends_ms) == {duration_bin(3_670_000): 11, duration_bin(72_000): 1}
    )
    minutes = dict(TelemetryMinute.objects.filter(run_id=pair.pk).values_list("minute", "count"))
    assert minutes == {datetime.fromtimestamp(applied - applied % 60, UTC): len(tasks)}

    body = pair_telemetry(pair_resolve("a", "tex_to_html"))
    assert body.open_run.id == pair.pk and body.last_closed_run is None
    stages = {s.stage: s for s in body.open_run.stages}
    conversion = stages["conversion"]
    assert conversion.count == len(conversions_ms)
    for stage, durations in (("conversion", conversions_ms), ("ingestion", ingestions_ms), ("end_to_end", ends_ms)):
        for name, fraction in (("p50", 0.5), ("p90", 0.9), ("p99", 0.99)):
            exact = _nearest_rank(durations, fraction)
            found = getattr(stages[stage], name)
            assert found.from_ms <= exact < found.to_ms, (stage, name, exact, found)
            assert found.ms == pytest.approx(bin_middle(duration_bin(exact)), abs=1e-3)
    assert [h.count for h in conversion.histogram] == [expected_bins[b] for b in sorted(expected_bins)]
    assert [h.from_ms for h in conversion.histogram] == [
        pytest.approx(bin_bounds(b)[0], abs=1e-3) for b in sorted(expected_bins)
    ]
    assert stages["queue_wait"].count == 0 and stages["queue_wait"].p50 is None


def test_a_result_of_unknown_arrival_counts_end_to_end_only(pair):
    with transaction.atomic(), connection.cursor() as cursor:
        results_record(cursor, [(pair.pk, timezone.now().timestamp(), pair.started_at.timestamp(), None)])
    assert sum(_bins(pair.pk, Stage.CONVERSION).values()) == sum(_bins(pair.pk, Stage.INGESTION).values()) == 0
    assert sum(_bins(pair.pk, Stage.END_TO_END).values()) == 1


def test_throughput_and_eta_from_known_minutes(pair):
    now = datetime(2026, 11, 26, 12, 34, 30, tzinfo=UTC)
    Run.objects.filter(pk=pair.pk).update(started_at=now - timedelta(minutes=30))
    # 12 tasks TODO; 2 of them leased: 12 left either way.
    conversions = Task.objects.filter(corpus__name="a", service__name="tex_to_html")
    Task.objects.filter(pk__in=conversions.order_by("id").values("pk")[:2]).update(status=MARK)
    counts = {now.replace(second=0) - timedelta(minutes=k): 10 * (k + 1) for k in range(RECENT_MINUTES + 3)}
    TelemetryMinute.objects.bulk_create(TelemetryMinute(run_id=pair.pk, minute=m, count=c) for m, c in counts.items())
    window = now.replace(second=0) - timedelta(minutes=RECENT_MINUTES)
    recent = sum(c for m, c in counts.items() if m >= window)
    seconds = (now - window).total_seconds()
    run = {
        "id": pair.pk,
        "corpus_id": pair.corpus_id,
        "service_id": pair.service_id,
        "started_at": now - timedelta(minutes=30),
    }
    eta = run_etas([run], now)[pair.pk]
    assert eta.remaining == 12 and eta.recent_completed == recent
    assert eta.rate_per_minute == pytest.approx(round(60 * recent / seconds, 3))
    assert eta.eta_seconds == pytest.approx(round(12 / (recent / seconds), 1))
    assert eta.finishes_at == now + timedelta(seconds=12 / (recent / seconds))
    assert eta.rate_since == window

    # A run younger than the window: its rate counts from its start.
    started = now - timedelta(minutes=2, seconds=15)
    young = run_etas([{**run, "started_at": started}], now)[pair.pk]
    young_recent = sum(c for m, c in counts.items() if m >= started.replace(second=0))
    assert young.recent_completed == young_recent
    assert young.rate_per_minute == pytest.approx(round(60 * young_recent / 135, 3))

    # No result within the window: no rate, no ETA.
    TelemetryMinute.objects.filter(run_id=pair.pk, minute__gte=window).delete()
    idle = run_etas([run], now)[pair.pk]
    assert idle.rate_per_minute is None and idle.eta_seconds is None and idle.finishes_at is None

    body = pair_telemetry(pair_resolve("a", "tex_to_html"))
    assert [p.completed for p in body.throughput] == [c for m, c in sorted(counts.items()) if m < window]


def test_current_carries_the_eta_and_the_api_gives_the_telemetry(api, pair):
    TelemetryMinute.objects.create(run_id=pair.pk, minute=timezone.now().replace(second=0, microsecond=0), count=6)
    current = api.get("/api/runs/a/tex_to_html/current").json()
    assert current["id"] == pair.pk and current["eta"]["remaining"] == 12
    assert current["eta"]["recent_completed"] == 6 and current["eta"]["rate_per_minute"] > 0
    # eta_seconds is rounded to 0.1 s
    assert current["eta"]["eta_seconds"] == pytest.approx(12 / (current["eta"]["rate_per_minute"] / 60), abs=0.051)
    body = api.get("/api/runs/a/tex_to_html/telemetry").json()  # public
    assert body["open_run"]["id"] == pair.pk
    assert [s["stage"] for s in body["open_run"]["stages"]] == ["queue_wait", "conversion", "ingestion", "end_to_end"]
    assert body["throughput"][0]["completed"] == 6 and body["eta"]["remaining"] == 12
    assert api.get("/api/runs/a/nope/telemetry").status_code == 404


def test_a_pair_keeps_the_telemetry_of_its_open_and_latest_closed_runs_only(pair):
    first = pair.pk
    TelemetryBin.objects.create(run_id=first, stage=Stage.CONVERSION, bin=3, count=1)
    finish([TaskStatus.NO_PROBLEM] * 12)
    second = run_open(corpus_id=pair.corpus_id, service_id=pair.service_id, owner="tester")
    TelemetryBin.objects.create(run_id=second.pk, stage=Stage.CONVERSION, bin=4, count=2)
    body = pair_telemetry(pair_resolve("a", "tex_to_html"))
    assert body.open_run.id == second.pk and body.last_closed_run.id == first
    assert {s.stage: s.count for s in body.last_closed_run.stages}["conversion"] == 1
    third = run_open(corpus_id=pair.corpus_id, service_id=pair.service_id, owner="tester")
    assert set(TelemetryBin.objects.values_list("run_id", flat=True)) == {second.pk}
    assert pair_telemetry(pair_resolve("a", "tex_to_html")).open_run.id == third.pk


def test_a_task_todo_again_within_its_run_waits_from_then_and_a_rerun_starts_it_afresh(pair):
    tasks = Task.objects.filter(corpus__name="a", service__name="tex_to_html")
    service_id = tasks.first().service_id
    leased = [t.id for t in lease_batch(service_id=service_id, limit=3, mark=MARK, lease_seconds=600)]
    assert not tasks.filter(todo_since__isnull=False).exists()
    with connection.cursor() as cursor:  # the statements below set now(): the test transaction's start
        cursor.execute("SELECT now()")
        now = cursor.fetchone()[0]
    leases_expire(leased[:1])
    leases_reap(max_attempts=5)
    assert list(tasks.filter(todo_since__isnull=False).values_list("id", "todo_since")) == [(leased[0], now)]
    tasks_pause(corpus_id=pair.corpus_id, service_id=pair.service_id)
    tasks_resume(corpus_id=pair.corpus_id, service_id=pair.service_id)
    # Every task is TODO again since the resume.
    assert tasks.filter(status=0).count() == tasks.count() == tasks.filter(todo_since=now).count() == 12
    finish([TaskStatus.NO_PROBLEM] * 12)
    rerun(corpus_name="a", service_name="tex_to_html", actor="tester", description="again")
    assert tasks.filter(status=0).count() == 12 and not tasks.filter(todo_since__isnull=False).exists()


def test_deleting_a_corpus_deletes_its_runs_telemetry(pair, corpus_root):
    imported(corpus_root, "b", documents=2)
    activated("b")
    other = Run.objects.get(corpus__name="b", finished_at__isnull=True)
    for run in (pair, other):
        TelemetryBin.objects.create(run_id=run.pk, stage=Stage.CONVERSION, bin=5, count=1)
        TelemetryMinute.objects.create(run_id=run.pk, minute=timezone.now(), count=1)
    data_purge(corpus_id=pair.corpus_id, actor="tester")
    assert list(TelemetryBin.objects.values_list("run_id", flat=True)) == [other.pk]
    assert list(TelemetryMinute.objects.values_list("run_id", flat=True)) == [other.pk]
