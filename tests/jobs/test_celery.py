"""Jobs through a real Celery worker on the real broker: enqueued by the API, run, and interrupted
when the worker process is killed."""

from __future__ import annotations

import os
import signal

import pytest

from jobs.actions import jobs_sweep
from jobs.models import Job, JobState
from tests.support import start_celery_worker, wait_until

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow, pytest.mark.tcp]


@pytest.fixture
def worker(purge_broker, process_tmpdir):
    process = start_celery_worker(tmpdir=process_tmpdir)
    yield process
    os.killpg(process.pid, signal.SIGKILL)
    process.wait(10)


def test_a_job_started_over_the_api_is_run_by_a_celery_worker(authed, worker):
    response = authed.post("/api/maintenance/analyze")
    uuid = response.json()["job"]["uuid"]

    def finished() -> dict | None:
        body = authed.get(f"/api/jobs/{uuid}").json()
        return body if body["state"] not in ("queued", "running") else None

    body = wait_until(finished, timeout=60, message="the analyze job to finish")
    assert body["state"] == "succeeded", body
    assert body["progress"]["percent"] == 100.0
    assert body["duration_seconds"] is not None and body["health"] == "ok"


def test_a_job_whose_worker_process_is_killed_becomes_interrupted(worker):
    from jobs.actions import job_send

    job = Job.objects.create(kind="test_sleep", actor="tester", params={"seconds": 120})
    job_send(job.pk)
    running = wait_until(
        lambda: Job.objects.filter(pk=job.pk, state=JobState.RUNNING).first(),
        timeout=60,
        message="job to start",
    )
    pid = int(running.worker.split(":")[1])
    os.kill(pid, signal.SIGKILL)  # the pool process running the job, not the whole worker
    wait_until(lambda: not _alive(pid), timeout=10, message="the pool process to die")
    # The worker's own sweep runs on beat; call it here the way beat would.
    assert jobs_sweep()["interrupted"] == 1
    job.refresh_from_db()
    assert job.state == JobState.INTERRUPTED and "died" in job.message
    assert job.finished_at is not None


def _alive(pid: int) -> bool:
    import psutil

    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_a_running_worker_follows_a_live_configuration_change_without_a_restart(authed, worker):
    """PUT /api/config reaches the job worker, another process, within its sync period, through the accessor;
    the worker's settings stay as they started."""
    from django.conf import settings

    from jobs.actions import job_send

    def seen_by_a_job() -> dict:
        job = Job.objects.create(kind="test_setting", actor="tester", params={"name": "JOB_STALL_SECONDS"})
        job_send(job.pk)
        done = wait_until(
            lambda: Job.objects.filter(pk=job.pk, state=JobState.SUCCEEDED).first(), timeout=60, message="the job"
        )
        return done.result

    environment = settings.CONFIG_ENVIRONMENT["jobs.stall_seconds"]
    assert seen_by_a_job() == {"value": environment, "setting": environment}
    changed = environment + 17
    response = authed.put("/api/config", {"jobs": {"stall_seconds": changed}}, format="json")
    assert response.status_code == 200 and response.json()["restart_required"] == []
    wait_until(lambda: seen_by_a_job()["value"] == changed, timeout=30, message="the worker to apply the change")
    assert seen_by_a_job() == {"value": changed, "setting": environment}
