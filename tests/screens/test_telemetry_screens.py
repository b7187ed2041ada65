"""The dashboard (home screen) and the run page's telemetry in real headless Chromium (Debian's, driven by
Playwright): they show what GET /api/dashboard and GET /api/runs/{c}/{s}/telemetry give, and violate no
Content-Security-Policy."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.db import connection, transaction
from django.utils import timezone

from config.screens import duration_ms_text
from corpora.models import Run, Task, TelemetryMinute
from corpora.telemetry import results_record
from jobs.models import JobState
from services.models import Service, Worker
from tests.corpora.helpers import activated, imported
from tests.factories import JobFactory
from tests.screens.test_csp_screens import _violations

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

CONVERSIONS_MS = [40.0, 55.0, 120.0, 300.0, 310.0, 900.0, 2_500.0, 7_000.0]


@pytest.fixture
def busy(corpus_root, settings) -> Run:
    """Corpus a: 12 tasks of an open run, 8 results applied at known conversion times in the last minutes,
    2 leased; a worker; a failed and a stalled job."""
    imported(corpus_root, "a", documents=12)
    activated("a")
    run = Run.objects.get(corpus__name="a", service__name="tex_to_html", finished_at__isnull=True)
    tasks = list(Task.objects.filter(corpus__name="a", service__name="tex_to_html").order_by("id"))
    leased_at = datetime(2026, 11, 26, 8, 0, tzinfo=UTC).timestamp()
    rows = [(run.pk, leased_at, run.started_at.timestamp(), leased_at + ms / 1000) for ms in CONVERSIONS_MS]
    with transaction.atomic(), connection.cursor() as cursor:
        results_record(cursor, rows)
    Task.objects.filter(pk__in=[t.pk for t in tasks[:8]]).update(status=-1)
    Task.objects.filter(pk__in=[t.pk for t in tasks[8:10]]).update(status=4242)
    minute = timezone.now().replace(second=0, microsecond=0)
    Run.objects.filter(pk=run.pk).update(started_at=minute - timedelta(minutes=20))
    TelemetryMinute.objects.filter(run_id=run.pk).delete()
    TelemetryMinute.objects.bulk_create(
        TelemetryMinute(run_id=run.pk, minute=minute - timedelta(minutes=k), count=count)
        for k, count in ((0, 2), (2, 3), (5, 3))
    )
    service = Service.objects.get(name="tex_to_html")
    Worker.objects.create(identity="w1@host", service=service, first_seen=timezone.now(), last_seen=timezone.now())
    failed = {"state": JobState.FAILED, "message": "the corpus root is gone", "finished_at": timezone.now()}
    JobFactory(kind="corpus_import", **failed)
    stale = timezone.now() - timedelta(seconds=settings.JOB_STALL_SECONDS + 60)
    JobFactory(kind="service_activate", state=JobState.RUNNING, started_at=stale, heartbeat_at=stale)
    return Run.objects.get(pk=run.pk)


def _number(text: str) -> float:
    return float(re.search(r"[\d.]+", text.replace(",", "")).group(0))


def test_the_dashboard_shows_what_its_api_twin_gives(page, live_server, api, busy):
    violations = _violations(page)
    page.goto(f"{live_server.url}/")
    board = api.get("/api/dashboard").json()
    assert page.title().startswith("Dashboard")

    [run] = board["open_runs"]
    assert run["id"] == busy.pk and run["eta"]["remaining"] == 4 and run["eta"]["recent_completed"] == 8
    row = page.locator(f"#open-runs tr[data-run='{busy.pk}']")
    assert row.locator("[data-field='remaining']").inner_text() == "4"
    total, left = run["tallies"]["total"], run["tallies"]["todo"] + run["tallies"]["queued"]
    assert _number(row.locator("[data-field='percent']").inner_text()) == round(100 * (total - left) / total, 1)
    # The rate divides by the seconds since its window's start: the page and the API read it a moment apart.
    assert _number(row.locator("[data-field='rate']").inner_text()) == pytest.approx(
        run["eta"]["rate_per_minute"], rel=0.05
    )
    assert re.search(r"\d", row.locator("[data-field='eta']").inner_text())
    assert row.locator("svg.statusbar rect.st-queued").get_attribute("width") == "2"

    fleet = {el.get_attribute("data-service"): el.inner_text() for el in page.locator("#status-workers .fleet").all()}
    assert fleet == {f["service"]: f"{f['service']}: {f['workers']}" for f in board["workers"]}
    backlog = {
        el.get_attribute("data-service"): _number(el.locator("b").inner_text())
        for el in page.locator("#backlog-per-service li").all()
    }
    assert backlog == {row["service"]: row["total"] for row in board["backlog_per_service"]} == {"tex_to_html": 4}
    jobs = {el.get_attribute("data-job") for el in page.locator("#trouble-jobs tr[data-job]").all()}
    assert jobs == {job["uuid"] for job in board["jobs"]} and len(jobs) == 2
    assert sorted(page.locator("#trouble-jobs .badge").all_inner_texts()) == ["failed", "stalled"]
    problems = {el.get_attribute("data-check") for el in page.locator("#dashboard-health .health-check").all()}
    assert problems == {check["name"] for check in board["health"]["problems"]}
    assert page.locator("#dashboard-health").get_attribute("data-status") == board["health"]["status"]
    assert violations == []


def _stage_rows(page: Any, run_id: int) -> dict[str, dict[str, str]]:
    rows = {}
    for row in page.locator(f"#stage-table tr[data-run='{run_id}']").all():
        cells = {name: row.locator(f"[data-field='{name}']").inner_text() for name in ("count", "p50", "p90", "p99")}
        rows[row.get_attribute("data-stage")] = cells
    return rows


def test_the_run_page_charts_the_telemetry_its_api_gives(page, live_server, api, busy):
    violations = _violations(page)
    page.goto(f"{live_server.url}/runs/a/tex_to_html")
    body = api.get("/api/runs/a/tex_to_html/telemetry").json()

    stages = {stage["stage"]: stage for stage in body["open_run"]["stages"]}
    shown = _stage_rows(page, busy.pk)
    assert set(shown) == set(stages)
    for name, stage in stages.items():
        assert int(shown[name]["count"]) == stage["count"]
        for p in ("p50", "p90", "p99"):
            expected = duration_ms_text(stage[p]["ms"]) if stage[p] else ""
            assert shown[name][p] == expected, (name, p)
            # As people read it: milliseconds under a second, then seconds, then two units at most.
            pattern = r"\d{1,3} ms|\d(\.\d)? ms|\d{1,2}(\.\d)? s|\d+ (min|h|d)( \d+ (s|min|h))?"
            assert not stage[p] or re.fullmatch(pattern, expected), expected
    assert stages["conversion"]["count"] == len(CONVERSIONS_MS)
    assert shown["conversion"]["p99"].endswith(" s")  # 7,000 ms reads in seconds

    minutes = page.locator("#throughput-chart g.minute")
    assert [int(m.get_attribute("data-count")) for m in minutes.all()] == [p["completed"] for p in body["throughput"]]
    heights = [m.locator("rect").bounding_box()["height"] for m in minutes.all()]
    assert heights[0] == pytest.approx(heights[1], abs=1) and heights[2] == pytest.approx(heights[0] * 2 / 3, abs=1)
    boxes = [m.locator("rect").bounding_box()["x"] for m in minutes.all()]
    assert boxes[0] < boxes[1] < boxes[2]  # oldest minute on the left, gaps for minutes with none

    bars = page.locator("#stage-conversion rect")
    assert [int(b.get_attribute("data-count")) for b in bars.all()] == [
        row["count"] for row in stages["conversion"]["histogram"]
    ]
    assert page.locator("#current-eta [data-field='remaining']").inner_text() == str(body["eta"]["remaining"])
    assert violations == []
