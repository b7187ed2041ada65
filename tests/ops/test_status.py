"""GET /api/status with its home screen, and GET /api/statistics with its screen: numbers equal what the
data says, the screens render the same serializers' data (twin rule), CSP-clean."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.db import connection
from django.db.models import Case, When
from django.utils import timezone

from config.middleware import SCREEN_CSP
from conversion.choices import COMPLETED_NAMES
from corpora.models import Corpus, Run, Task
from corpora.pairs import runs_close_drained
from jobs.models import JobState
from ops.health import health
from services.choices import ProtectedService
from services.models import Service, Worker
from tests.corpora.helpers import activated, imported
from tests.factories import JobFactory

pytestmark = pytest.mark.django_db

INLINE = (r"<script(?![^>]*\bsrc=)[^>]*>", r"<style\b", r"\sstyle=", r"\son[a-z]+=", r"javascript:")


def _finish(corpus: str, statuses: list[int], service: str = "tex_to_html") -> None:
    """Give the pair's tasks these statuses and close its drained run (frozen tallies, as in production)."""
    tasks = list(Task.objects.filter(corpus__name=corpus, service__name=service).order_by("document_id"))
    for task, status in zip(tasks, statuses, strict=True):
        Task.objects.filter(pk=task.pk).update(status=status)
    runs_close_drained({(tasks[0].corpus_id, tasks[0].service_id)})


def _worker(identity: str, service: str, seen_ago: timedelta) -> None:
    at = timezone.now() - seen_ago
    Worker.objects.create(
        identity=identity, service=Service.objects.get(name=service), first_seen=at, last_seen=at, dispatched=3
    )


def _inline_offences(html: str) -> list[str]:
    return [m.group(0) for pattern in INLINE for m in re.finditer(pattern, html)]


# --- status ------------------------------------------------------------------------------------------


@pytest.fixture
def busy(corpus_root):
    imported(corpus_root, "a", documents=3)
    imported(corpus_root, "b", documents=2)
    activated("a")
    _finish("a", [-1, -1, -2])  # a closed run
    activated("b")  # the latest run, open
    activated("a", "tex_to_html_next")  # 3 more TODO
    first = Task.objects.filter(corpus__name="b", service__name="tex_to_html").order_by("document_id").first()
    Task.objects.filter(pk=first.pk).update(status=424242)  # leased: queued
    _worker("w1@host", "tex_to_html", timedelta(seconds=10))
    _worker("w2@host", "tex_to_html", timedelta(seconds=30))
    _worker("w3@host", "tex_to_html_next", timedelta(seconds=5))
    _worker("gone@host", "tex_to_html_next", timedelta(hours=2))


def test_the_status_record_says_what_the_data_says(api, busy):
    body = api.get("/api/status").json()  # public: no token
    assert body["corpora"] == Corpus.objects.count() == 2
    conversions = Task.objects.exclude(service__name__in=ProtectedService.values)
    todo, queued = conversions.filter(status=0).count(), conversions.filter(status__gt=0).count()
    assert (todo, queued) == (4, 1)
    assert body["backlog"] == {"todo": todo, "queued": queued, "total": todo + queued}
    fleet = {row["service"]: row["workers"] for row in body["workers"]}
    assert fleet == {"tex_to_html": 2, "tex_to_html_next": 1}  # the worker seen 2 h ago is not active
    latest = Run.objects.order_by("-started_at", "-id").first()
    assert body["latest_run"]["id"] == latest.pk and body["latest_run"]["open"] is True
    assert body["latest_run"]["tallies"]["todo"] == 3  # live tallies of the open run


def test_the_status_record_of_an_empty_system(api):
    body = api.get("/api/status").json()
    assert body["corpora"] == 0 and body["workers"] == [] and body["latest_run"] is None
    assert body["backlog"] == {"todo": 0, "queued": 0, "total": 0}


def test_the_home_screen_shows_the_same_record_polls_it_and_is_csp_clean(client, api, busy):
    response = client.get("/")
    assert response.status_code == 200
    # The home screen is the dashboard: its record is GET /api/dashboard's, which holds GET /api/status's.
    status = api.get("/api/status").json()
    assert response.context["dashboard"] == api.get("/api/dashboard").json()
    assert {key: response.context["status"][key] for key in status} == status
    assert response["Content-Security-Policy"] == SCREEN_CSP
    html = response.content.decode()
    assert _inline_offences(html) == []
    poller = re.search(r'<div id="status-body"([^>]*)>', html).group(1)
    assert 'hx-get="?fragment=body"' in poller and 'hx-trigger="every 5s"' in poller
    assert re.search(r'id="status-backlog">5\b', html)
    # A change shows in the next poll's fragment.
    Task.objects.filter(corpus__name="a", service__name="tex_to_html_next").update(status=-1)
    fragment = client.get("/?fragment=body")
    assert fragment.status_code == 200 and "<html" not in fragment.content.decode()
    assert fragment.context["status"]["backlog"]["total"] == 2
    assert re.search(r'id="status-backlog">2\b', fragment.content.decode())


def test_the_dashboard_says_what_the_data_says(api, busy, settings):
    now = timezone.now()
    stale = now - timedelta(seconds=settings.JOB_STALL_SECONDS + 30)
    stalled = JobFactory(kind="service_activate", state=JobState.RUNNING, started_at=stale, heartbeat_at=stale)
    failed = JobFactory(kind="corpus_import", state=JobState.FAILED, finished_at=now - timedelta(hours=1))
    JobFactory(kind="corpus_import", state=JobState.FAILED, finished_at=now - timedelta(hours=30))  # too old
    JobFactory(kind="corpus_import", state=JobState.RUNNING, started_at=now, heartbeat_at=now)  # alive
    JobFactory(kind="corpus_import", state=JobState.SUCCEEDED, finished_at=now)
    body = api.get("/api/dashboard").json()  # public: no token
    assert {key: body[key] for key in api.get("/api/status").json()} == api.get("/api/status").json()
    open_runs = Run.objects.filter(finished_at__isnull=True).order_by("started_at", "id")
    assert [run["id"] for run in body["open_runs"]] == [run.pk for run in open_runs]
    conversions = Task.objects.exclude(service__name__in=ProtectedService.values)
    for run in body["open_runs"]:
        pair = conversions.filter(corpus__name=run["corpus"], service__name=run["service"])
        assert run["eta"]["remaining"] == pair.filter(status__gte=0).count()
        assert run["eta"]["rate_per_minute"] is None and run["eta"]["eta_seconds"] is None  # nothing applied yet
    backlog = {row["service"]: (row["todo"], row["queued"], row["total"]) for row in body["backlog_per_service"]}
    assert backlog == {"tex_to_html": (1, 1, 2), "tex_to_html_next": (3, 0, 3)}
    assert [(job["uuid"], job["health"]) for job in body["jobs"]] == [
        (str(failed.pk), "failed"), (str(stalled.pk), "stalled")
    ]  # fmt: skip
    assert all("message" not in job for job in body["jobs"])
    checks = health().checks
    assert body["health"]["problems"] == [{"name": c.name, "status": c.status} for c in checks if c.status != "ok"]


# --- statistics --------------------------------------------------------------------------------------


def _tallies(done: list[int], todo: int = 0) -> dict:
    """status_counts shape: no_problem, warning, error, fatal, invalid from `done`."""
    names = ["no_problem", "warning", "error", "fatal", "invalid"]
    tallies = {"todo": todo, "queued": 0, "blocked": 0, **dict(zip(names, done, strict=True))}
    tallies["total"] = sum(done) + todo
    tallies["in_progress"] = todo
    return tallies


def _closed_runs(corpus: str, service: str, count: int) -> None:
    """`count` closed runs of the pair, an hour apart, run i lasting (i % 5 + 1) minutes."""
    pair = {"corpus": Corpus.objects.get(name=corpus), "service": Service.objects.get(name=service)}
    base = timezone.now() - timedelta(days=10)
    runs = Run.objects.bulk_create(
        Run(
            **pair,
            owner="tester",
            finished_at=base + timedelta(hours=i, minutes=i % 5 + 1),
            tallies=_tallies([i, 1, i % 3, 0, 0]),
        )
        for i in range(count)
    )
    Run.objects.filter(pk__in=[r.pk for r in runs]).update(
        started_at=Case(*(When(pk=r.pk, then=base + timedelta(hours=i)) for i, r in enumerate(runs)))
    )


def _expected(corpus: str, service: str) -> dict:
    runs = list(
        Run.objects.filter(corpus__name=corpus, service__name=service, finished_at__isnull=False).order_by(
            "-started_at", "-id"
        )
    )
    secs = [(r.finished_at - r.started_at).total_seconds() for r in runs]
    done = [sum(r.tallies[name] for name in COMPLETED_NAMES.values()) for r in runs]
    timed = [(d, s) for d, s in zip(done, secs, strict=True) if s > 0]
    return {
        "runs": len(runs),
        "mean_duration_seconds": pytest.approx(sum(secs) / len(secs), abs=0.001),
        "last_duration_seconds": pytest.approx(secs[0], abs=0.001),
        "tasks_per_hour": pytest.approx(sum(d for d, _ in timed) * 3600 / sum(s for _, s in timed), abs=0.1),
        "trend_ids": [r.pk for r in reversed(runs[:20])],
        "trend_tallies": [r.tallies for r in reversed(runs[:20])],
    }


@pytest.fixture
def history(corpus_root):
    imported(corpus_root, "a", documents=3)
    imported(corpus_root, "b", documents=2)
    activated("a")
    _finish("a", [-1, -2, -4])  # one run closed the production way
    _closed_runs("a", "tex_to_html", 25)
    activated("b")
    _closed_runs("b", "tex_to_html", 3)  # and b's open run is left out


def test_statistics_per_pair_equal_the_runs(api, history):
    pairs = api.get("/api/statistics").json()
    assert [(p["corpus"], p["service"]) for p in pairs] == [("a", "tex_to_html"), ("b", "tex_to_html")]
    for pair in pairs:
        expected = _expected(pair["corpus"], pair["service"])
        assert pair["runs"] == expected["runs"]
        assert pair["mean_duration_seconds"] == expected["mean_duration_seconds"]
        assert pair["last_duration_seconds"] == expected["last_duration_seconds"]
        assert pair["tasks_per_hour"] == expected["tasks_per_hour"]
        assert [point["id"] for point in pair["trend"]] == expected["trend_ids"]
        assert [point["tallies"] for point in pair["trend"]] == expected["trend_tallies"]
    assert pairs[0]["runs"] == 26 and len(pairs[0]["trend"]) == 20 and pairs[1]["runs"] == 3
    # The b pair: runs of 1, 2, 3 minutes completing 1, 3, 5 tasks: 9 tasks in 6 minutes.
    assert pairs[1]["mean_duration_seconds"] == 120 and pairs[1]["last_duration_seconds"] == 180
    assert pairs[1]["tasks_per_hour"] == 90.0
    assert [p["corpus"] for p in api.get("/api/statistics?corpus=b").json()] == ["b"]
    assert api.get("/api/statistics?corpus=b&service=tex_to_html_next").status_code == 404
    assert api.get("/api/statistics?corpus=nope").status_code == 404


def test_statistics_over_10000_runs_are_one_grouped_read(api, history):
    pair = Run.objects.filter(corpus__name="a").values("corpus_id", "service_id").first()
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO corpora_run (corpus_id, service_id, owner, description, started_at, finished_at, tallies)"
            " SELECT %s, %s, 'bench', '', now() - make_interval(hours => g), now() - make_interval(hours => g)"
            " + interval '2 minutes', jsonb_build_object('no_problem', 4, 'warning', 0, 'error', 0, 'fatal', 0,"
            " 'invalid', 0, 'todo', 0, 'queued', 0, 'blocked', 0, 'total', 4, 'in_progress', 0)"
            " FROM generate_series(1, 10000) g",
            [pair["corpus_id"], pair["service_id"]],
        )
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as queries:
        pairs = api.get("/api/statistics").json()
    assert pairs[0]["runs"] == 10026 and len(pairs[0]["trend"]) == 20
    assert sum("corpora_run" in q["sql"] for q in queries.captured_queries) == 1


def test_the_statistics_screen_is_the_twin_with_one_chart_per_pair(client, api, history):
    response = client.get("/statistics")
    assert response.status_code == 200
    assert response.context["pairs"] == api.get("/api/statistics").json()
    html = response.content.decode()
    assert _inline_offences(html) == []
    charts = re.findall(r'<tr data-pair="([^"]+)">.*?<svg class="trend-chart"([^>]*)>(.*?)</svg>', html, re.S)
    assert [pair for pair, _, _ in charts] == ["a/tex_to_html", "b/tex_to_html"]
    for (_, attributes, svg), pair in zip(charts, response.context["pairs"], strict=True):
        assert 'width="240"' in attributes and 'height="64"' in attributes
        bars = re.findall(r'<g class="run" data-run="(\d+)">(.*?)</g>', svg, re.S)
        assert [int(run) for run, _ in bars] == [point["id"] for point in pair["trend"]]
        for (_, bar), point in zip(bars, pair["trend"], strict=True):
            counts = dict(re.findall(r'<rect class="st-\w+" data-status="(\w+)" data-count="(\d+)"', bar))
            assert {k: int(v) for k, v in counts.items()} == {
                k: v for k, v in point["tallies"].items() if v and k not in ("total", "in_progress")
            }
    assert client.get("/statistics?corpus=nope").status_code == 404
    empty = client.get("/statistics?corpus=a&service=tex_to_html_next")
    assert empty.status_code == 404
