"""GET /metrics' domain metrics: the task gauges equal the overview after a real conversion (a dispatcher and
a sandboxed LaTeXML worker), the sink's ingestion counter and latency histogram count that conversion's
results, the jobs gauges match the Job rows, each worker row's heartbeat numbers and the dispatcher's counters
are exported as they are stored, and the Grafana dashboard plots only metrics that exist."""

from __future__ import annotations

import json
import re
import shutil
from datetime import timedelta
from pathlib import Path

import pytest
from django.db import connection
from django.utils import timezone

from corpora.actions.corpora import corpus_import
from jobs.models import Job
from jobs.runner import job_run
from jobs.serializers import JobSerializer
from services.actions import service_register
from services.models import DispatcherState, Service, Worker
from tests.corpora.helpers import activated, imported
from tests.dispatcher.harness import wait_for
from tests.runs.test_end_to_end import CLEAN, WARNING, farm  # noqa: F401 (the farm fixture)
from tests.support import metrics_scrape

DASHBOARD = Path(__file__).resolve().parents[2] / "ops" / "grafana-dashboard.json"
pytestmark = [pytest.mark.django_db, pytest.mark.tcp]

STATUSES = ("todo", "queued", "no_problem", "warning", "error", "fatal", "invalid", "blocked")


def _ingestion(samples: dict[str, dict[tuple, float]]) -> tuple[float, float, float]:
    """(results ingested, batches observed, observations in the +Inf bucket)."""
    return (
        samples["ccs_results_ingested_total"][()],
        samples["ccs_ingest_batch_seconds_count"][()],
        samples["ccs_ingest_batch_seconds_bucket"][(("le", "+Inf"),)],
    )


def test_metrics_answer_401_without_a_valid_token(api, token) -> None:
    assert api.get("/metrics").status_code == 401
    assert api.get("/metrics", {"token": "ccs_wrong"}).status_code == 401
    assert api.get("/metrics", HTTP_X_SERVICE_TOKEN=token).status_code == 200


@pytest.mark.django_db(transaction=True)
@pytest.mark.slow
def test_after_a_real_conversion_the_gauges_equal_the_overview_and_the_sink_counted_its_results(
    api,
    authed,
    token,
    corpus_root,
    farm,  # noqa: F811
) -> None:
    if not shutil.which("latexmlc"):
        pytest.fail("latexmlc is not installed: apt-get install latexml")
    directory = corpus_root / "papers"
    directory.mkdir()
    for name, text in (("clean", CLEAN), ("warning", WARNING)):
        (directory / f"{name}.tex").write_text(text)
    job_run(corpus_import(name="papers", path=str(directory), actor="tester", send=False).pk)
    activated("papers")

    before = metrics_scrape(api, token)
    assert before["ccs_tasks"][(("service", "tex_to_html"), ("status", "todo"))] == 2
    assert before["ccs_backlog_tasks"][(("service", "tex_to_html"),)] == 2
    ingested_before = _ingestion(before)

    farm("tex_to_html")
    wait_for(
        lambda: _ingestion(metrics_scrape(api, token))[0] - ingested_before[0] >= 2,
        timeout=240, interval=0.2, message="the sink to ingest both results",
    )  # fmt: skip
    after = metrics_scrape(api, token)
    overview = authed.get("/api/reports/papers/tex_to_html").json()["counts"]
    assert (overview["no_problem"], overview["warning"], overview["todo"], overview["queued"]) == (1, 1, 0, 0)
    for status in STATUSES:
        assert after["ccs_tasks"][(("service", "tex_to_html"), ("status", status))] == overview[status], status
    assert after["ccs_backlog_tasks"][(("service", "tex_to_html"),)] == 0
    assert after["ccs_leases_in_flight"][(("service", "tex_to_html"),)] == 0
    assert after["ccs_leases_expired"][()] == 0

    results, batches, observed = (now - then for now, then in zip(_ingestion(after), ingested_before, strict=True))
    assert results == 2
    assert 1 <= batches <= 2 and observed == batches  # one or two batches, each observed once
    assert after["ccs_ingest_batch_seconds_sum"][()] > before["ccs_ingest_batch_seconds_sum"][()]


def test_jobs_gauges_match_the_job_rows_and_their_health(api, token, settings) -> None:
    settings.JOB_STALL_SECONDS = 60
    old = timezone.now() - timedelta(minutes=5)
    Job.objects.create(kind="corpus_import", actor="t", state="succeeded")
    Job.objects.create(kind="corpus_import", actor="t", state="failed")
    Job.objects.create(kind="corpus_import", actor="t", state="interrupted")
    Job.objects.create(kind="corpus_import", actor="t", state="running", heartbeat_at=timezone.now())
    Job.objects.create(kind="corpus_import", actor="t", state="running", heartbeat_at=old)
    queued = Job.objects.create(kind="corpus_import", actor="t", state="queued")
    Job.objects.filter(pk=queued.pk).update(created_at=old)

    samples = metrics_scrape(api, token)
    jobs = Job.objects.all()
    for state in ("queued", "running", "succeeded", "failed", "interrupted"):
        assert samples["ccs_jobs"][(("state", state),)] == sum(job.state == state for job in jobs), state
    health = [JobSerializer(job).data["health"] for job in jobs]
    assert {name: samples["ccs_jobs_health"][(("health", name),)] for name in ("ok", "stalled", "failed")} == {
        "ok": health.count("ok"), "stalled": health.count("stalled"), "failed": health.count("failed"),
    }  # fmt: skip
    assert health.count("stalled") == 2 and health.count("failed") == 2


def test_pool_gauges_follow_the_connection_pool(api, token) -> None:
    samples = metrics_scrape(api, token)
    if connection.pool is None:
        assert "ccs_db_pool_in_use" not in samples and "ccs_db_pool_waiting" not in samples
    else:
        assert samples["ccs_db_pool_in_use"][()] >= 1  # this request's connection
        assert samples["ccs_db_pool_waiting"][()] == 0


def _worker(service: str, identity: str, **heartbeat: object) -> None:
    if not Service.objects.filter(name=service).exists():
        service_register(name=service, actor="t")
    now = timezone.now()
    Worker.objects.create(
        service=Service.objects.get(name=service), identity=identity, first_seen=now, last_seen=now, **heartbeat
    )


def _dispatcher_ran(**counters: int) -> None:
    now = timezone.now()
    DispatcherState.objects.create(started_at=now, heartbeat_at=now, pid=4242, **counters)


def test_each_worker_row_is_exported_with_its_conversions_peak_memory_and_kills_by_every_reason(api, token) -> None:
    _worker("tex_to_html", "beating:1", conversions=8, peak_rss=432_013_312, kills={"memory": 2, "timeout": 1},
            heartbeat_at=timezone.now())  # fmt: skip
    _worker("tex_to_html", "cortex:2", dispatched=3, returned=3)  # no heartbeat: zeros
    _worker("other", "beating:1", conversions=5, peak_rss=1 << 30, kills={"governor": 4, "disk": 1, "bogus": 9})

    samples = metrics_scrape(api, token)
    series = {
        ("tex_to_html", "beating:1"): (8, 432_013_312, {"timeout": 1, "memory": 2}),
        ("tex_to_html", "cortex:2"): (0, 0, {}),
        ("other", "beating:1"): (5, 1 << 30, {"governor": 4, "disk": 1}),
    }
    for (service, worker), (conversions, peak, kills) in series.items():
        labels = (("service", service), ("worker", worker))
        assert samples["ccs_worker_conversions_total"][labels] == conversions
        assert samples["ccs_worker_peak_rss_bytes"][labels] == peak
        for reason in ("timeout", "memory", "processes", "disk", "governor", "host_oom"):
            key = tuple(sorted((*labels, ("reason", reason))))
            assert samples["ccs_worker_kills_total"][key] == kills.get(reason, 0), (service, worker, reason)
    assert len(samples["ccs_worker_conversions_total"]) == len(samples["ccs_worker_peak_rss_bytes"]) == 3
    assert len(samples["ccs_worker_kills_total"]) == 3 * 6  # one series per worker row and reason, no more


def test_the_dispatcher_counters_are_exported_with_released_and_retried_beside_the_others(api, token) -> None:
    assert not [name for name in metrics_scrape(api, token) if name.startswith("ccs_dispatcher_")]  # none has run yet
    counters = {"leased": 40, "dispatched": 38, "ingested": 30, "discarded": 2, "garbage": 1, "reaped": 5,
                "failed_for_retries": 1, "released": 7, "retried": 3}  # fmt: skip
    _dispatcher_ran(**counters)
    samples = metrics_scrape(api, token)
    assert {name: samples[f"ccs_dispatcher_{name}_total"][()] for name in counters} == counters


def test_the_results_disk_is_exported_with_its_free_bytes_and_whether_it_is_full(api, token, settings, tmp_path):
    settings.RESULTS_DIR = tmp_path
    settings.RESULTS_MIN_FREE_MB = 0
    samples = metrics_scrape(api, token)
    assert samples["ccs_results_disk_full"][()] == 0
    free = samples["ccs_results_disk_free_bytes"][()]
    assert free > 0
    settings.RESULTS_MIN_FREE_MB = int(free) // (1024 * 1024) + 1024  # above what the disk has free
    assert metrics_scrape(api, token)["ccs_results_disk_full"][()] == 1


def test_the_worker_series_take_one_query_for_any_number_of_workers() -> None:
    from django.test.utils import CaptureQueriesContext

    from ops.metrics import worker_rows

    for n in range(5):
        _worker("tex_to_html", f"w:{n}", kills={"disk": n})
    with CaptureQueriesContext(connection) as queries:
        rows = worker_rows()
    assert len(rows) == 5 and len(queries) == 1
    assert [row[4]["disk"] for row in rows] == [0, 1, 2, 3, 4]


def test_the_dashboard_parses_and_plots_only_exposed_metrics(api, token, corpus_root) -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    expressions = [target["expr"] for panel in dashboard["panels"] for target in panel.get("targets", [])]
    plotted = {name for expr in expressions for name in re.findall(r"\bccs_[a-z_]+", expr)}
    assert len(plotted) >= 10
    imported(corpus_root, "demo", documents=2)
    activated("demo")  # tasks, so that the per-service families have samples
    _worker("tex_to_html", "w:1", conversions=1, heartbeat_at=timezone.now())  # and the per-worker families
    _dispatcher_ran()  # and the dispatcher's counters
    exposed = set(metrics_scrape(api, token))
    if connection.pool is None:  # pool gauges exist only where the pool is on
        plotted -= {"ccs_db_pool_in_use", "ccs_db_pool_waiting"}
    assert plotted <= exposed, plotted - exposed
