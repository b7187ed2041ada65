from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.utils import timezone

from jobs.models import Job, JobState
from tests.factories import JobFactory

pytestmark = pytest.mark.django_db


def test_jobs_are_listed_newest_first_with_health_and_duration(authed):
    older = JobFactory()
    newer = JobFactory()
    Job.objects.filter(pk=older.pk).update(created_at=timezone.now() - timedelta(hours=1))
    rows = authed.get("/api/jobs").json()
    assert [row["uuid"] for row in rows] == [str(newer.pk), str(older.pk)]
    assert {"health", "duration_seconds", "actor", "params", "progress", "state"} <= rows[0].keys()


def test_active_narrows_to_queued_and_running(authed):
    JobFactory(state=JobState.QUEUED)
    JobFactory(state=JobState.RUNNING, started_at=timezone.now(), heartbeat_at=timezone.now())
    JobFactory(state=JobState.SUCCEEDED)
    JobFactory(state=JobState.INTERRUPTED)
    states = {row["state"] for row in authed.get("/api/jobs", {"active": "true"}).json()}
    assert states == {"queued", "running"}
    assert len(authed.get("/api/jobs").json()) == 4


def test_limit_defaults_to_50_and_is_capped_at_200(authed):
    Job.objects.bulk_create([Job(kind="test_count", actor="t") for _ in range(210)])
    assert len(authed.get("/api/jobs").json()) == 50
    assert len(authed.get("/api/jobs", {"limit": 7}).json()) == 7
    assert len(authed.get("/api/jobs", {"limit": 1000}).json()) == 200
    assert authed.get("/api/jobs", {"limit": 0}).status_code == 400


def test_health_is_stalled_without_a_heartbeat_and_failed_for_interrupted_jobs(authed, settings):
    settings.JOB_STALL_SECONDS = 60
    quiet = JobFactory(state=JobState.RUNNING, started_at=timezone.now())
    Job.objects.filter(pk=quiet.pk).update(heartbeat_at=timezone.now() - timedelta(seconds=61))
    lively = JobFactory(state=JobState.RUNNING, started_at=timezone.now(), heartbeat_at=timezone.now())
    dead = JobFactory(state=JobState.INTERRUPTED)
    health = {row["uuid"]: row["health"] for row in authed.get("/api/jobs").json()}
    assert health == {str(quiet.pk): "stalled", str(lively.pk): "ok", str(dead.pk): "failed"}


def test_duration_is_measured_from_start_to_finish(authed):
    start = timezone.now() - timedelta(seconds=90)
    job = JobFactory(state=JobState.SUCCEEDED, started_at=start, finished_at=start + timedelta(seconds=12.5))
    assert authed.get(f"/api/jobs/{job.pk}").json()["duration_seconds"] == 12.5
    queued = JobFactory()
    assert authed.get(f"/api/jobs/{queued.pk}").json()["duration_seconds"] is None


def test_an_unknown_or_malformed_uuid_is_a_404_problem(authed):
    for value in ("00000000-0000-0000-0000-000000000000", "not-a-uuid"):
        response = authed.get(f"/api/jobs/{value}")
        assert response.status_code == 404 and response["Content-Type"] == "application/problem+json"


def test_jobs_endpoints_are_token_gated(api):
    job = JobFactory()
    assert api.get("/api/jobs").status_code == 401
    assert api.get(f"/api/jobs/{job.pk}").status_code == 401


def test_maintenance_is_debounced_and_answers_202_with_the_job(authed):
    first = authed.post("/api/maintenance/reindex")
    second = authed.post("/api/maintenance/reindex")
    assert first.status_code == second.status_code == 202
    assert first.json()["created"] is True and second.json()["created"] is False
    assert first.json()["job"]["uuid"] == second.json()["job"]["uuid"]
    assert first.json()["job"]["actor"] == "tester"


def test_the_jobs_screens_render_the_same_dtos_as_the_api(authed, screen_client):
    done = JobFactory(state=JobState.SUCCEEDED, started_at=timezone.now(), finished_at=timezone.now())
    JobFactory(state=JobState.FAILED, message="boom", finished_at=timezone.now())
    for query in ({}, {"active": "true"}, {"limit": "1"}):
        screen = screen_client.get("/jobs", query)
        assert json.loads(json.dumps(screen.context["jobs"])) == authed.get("/api/jobs", query).json()
    detail = screen_client.get(f"/jobs/{done.pk}")
    assert json.loads(json.dumps(detail.context["job"])) == authed.get(f"/api/jobs/{done.pk}").json()


def test_the_jobs_screens_need_a_signed_in_user(client):
    response = client.get("/jobs")
    assert response.status_code == 302 and response["Location"].startswith("/login")


def test_the_detail_fragment_stops_polling_once_the_job_has_ended(screen_client):
    running = JobFactory(state=JobState.RUNNING, started_at=timezone.now(), heartbeat_at=timezone.now())
    ended = JobFactory(state=JobState.SUCCEEDED)
    assert screen_client.get(f"/jobs/{running.pk}", {"fragment": "body"}).status_code == 200
    assert screen_client.get(f"/jobs/{ended.pk}", {"fragment": "body"}).status_code == 286


def test_the_maintenance_screen_starts_a_journaled_job(screen_client):
    from accounts.models import AuditEntry

    response = screen_client.post("/maintenance", {"operation": "analyze"})
    job = Job.objects.get(kind="maintenance_analyze")
    assert response.status_code == 302 and response["Location"] == f"/jobs/{job.pk}"
    assert job.actor == "tester"
    assert AuditEntry.objects.filter(action="maintenance.analyze", actor="tester").exists()


def test_maintenance_started_directly_is_journaled_as_from_the_api():
    from accounts.models import AuditEntry
    from jobs.actions import tables_analyze_start, tables_reindex_start

    job, created = tables_analyze_start(actor="shell")
    assert created and job.kind == "maintenance_analyze" and job.actor == "shell"
    tables_reindex_start(actor="beat")
    rows = AuditEntry.objects.order_by("id").values_list("action", "actor", "outcome")
    assert list(rows) == [("maintenance.analyze", "shell", "ok"), ("maintenance.reindex", "beat", "ok")]
