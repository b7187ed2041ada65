"""Trouble shown where operators look: a service with waiting tasks and no live worker, and conversions in
flight (document, worker, elapsed time, share of the timeout), flagged past their service's p99 runtime.
The same facts in health, the dashboard (screen and API), the run's ETA, the corpus page and /metrics."""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone

from corpora.models import Task
from services.models import InFlight, Service, Worker
from tests.corpora.helpers import activated, imported

pytestmark = [pytest.mark.django_db]


def _checks(authed) -> dict[str, dict]:
    response = authed.get("/api/health")
    assert response.status_code == 200, response.content
    return {check["name"]: check for check in response.json()["checks"]}


def _worker(service: str, identity: str, **fields) -> Worker:
    now = timezone.now()
    return Worker.objects.create(
        service=Service.objects.get(name=service), identity=identity, first_seen=now, last_seen=now, **fields
    )


def test_a_service_with_waiting_tasks_and_no_live_worker_is_a_problem_everywhere(authed, screen_client, corpus_root):
    imported(corpus_root, "c", documents=4)
    activated("c")
    served = _checks(authed)["served"]
    assert served["status"] == "problem"
    assert "tex_to_html (4 waiting)" in served["summary"] and "--service tex_to_html" in served["remediation"]
    assert served["details"]["stranded"] == [{"service": "tex_to_html", "waiting": 4, "corpora": ["c"]}]
    dashboard = authed.get("/api/dashboard").json()
    assert {"name": "served", "status": "problem"} in dashboard["health"]["problems"]
    (run,) = dashboard["open_runs"]
    assert run["eta"]["stalled"] == "no live worker serves its service" and run["eta"]["finishes_at"] is None
    home = screen_client.get("/").content.decode()
    assert 'data-stalled="no live worker serves its service"' in home
    corpus = screen_client.get("/corpora/c").content.decode()
    assert "no live worker" in corpus
    assert authed.get("/api/corpora/c").json()["services"][1]["served"] is False
    metrics = authed.get("/metrics").content.decode()
    assert 'ccs_service_waiting_unserved_tasks{service="tex_to_html"} 4.0' in metrics

    # A worker that has heartbeats serves it: nothing stranded. Its heartbeat two silences old does not.
    worker = _worker("tex_to_html", "vm:1:0", heartbeat_at=timezone.now())
    assert _checks(authed)["served"]["status"] == "ok"
    run = authed.get("/api/dashboard").json()["open_runs"][0]
    assert run["eta"]["stalled"] is None
    assert "no live worker" not in screen_client.get("/corpora/c").content.decode()
    Worker.objects.filter(pk=worker.pk).update(heartbeat_at=timezone.now() - timedelta(minutes=3))
    assert _checks(authed)["served"]["status"] == "problem"
    # Nothing waiting (every task leased, say): nothing stranded either.
    Task.objects.filter(corpus__name="c").update(status=77, leased_until=timezone.now() + timedelta(minutes=5))
    assert _checks(authed)["served"]["status"] == "ok"


def test_conversions_in_flight_are_listed_and_those_past_the_p99_flagged(authed, screen_client, corpus_root: Path):
    imported(corpus_root, "c", documents=2)
    activated("c")
    service = Service.objects.get(name="tex_to_html")
    _worker("tex_to_html", "vm:1:0", heartbeat_at=timezone.now())
    now = timezone.now()
    common = {"service": service, "corpus": "c", "worker": "vm:1", "heartbeat_at": now, "timeout_seconds": 300.0}
    InFlight.objects.create(task_id=1, document="slow", thread="vm:1:0", since=now - timedelta(seconds=240),
                            p99_ms=30_000, **common)  # fmt: skip
    InFlight.objects.create(task_id=2, document="fresh", thread="vm:1:1", since=now - timedelta(seconds=2),
                            p99_ms=30_000, **common)  # fmt: skip
    check = _checks(authed)["in_flight"]
    assert check["status"] == "warning" and "slow of c on vm:1:0" in check["summary"], check
    assert (check["details"]["in_flight"], check["details"]["past_p99"]) == (2, 1)
    (listed,) = check["details"]["conversions"]
    assert listed["document"] == "slow" and 0.8 <= listed["timeout_share"] < 0.9
    dashboard = authed.get("/api/dashboard").json()
    assert (dashboard["in_flight"], dashboard["in_flight_past_p99"]) == (2, 1)
    assert [row["document"] for row in dashboard["in_flight_longest"]] == ["slow", "fresh"]
    home = screen_client.get("/").content.decode()
    rows = re.findall(r'<tr data-task="(\d+)"( class="past-p99")?>', home)
    assert rows == [("1", ' class="past-p99"'), ("2", "")], rows
    metrics = authed.get("/metrics").content.decode()
    assert 'ccs_in_flight_conversions{service="tex_to_html"} 2.0' in metrics
    assert 'ccs_in_flight_past_p99{service="tex_to_html"} 1.0' in metrics
    workers = screen_client.get("/services/tex_to_html/workers").content.decode()
    assert re.search(r'class="in-flight past-p99" data-task="1">slow', workers)

    InFlight.objects.filter(task_id=1).delete()
    assert _checks(authed)["in_flight"]["status"] == "ok"
