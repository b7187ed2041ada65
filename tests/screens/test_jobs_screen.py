"""The jobs screens in real headless Chromium (Debian's, driven by Playwright): sign in with a
token, see the jobs, and watch a job's progress change without reloading the page."""

from __future__ import annotations

import pytest
from django.utils import timezone

from jobs.models import Job, JobState
from tests.factories import JobFactory

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


def test_an_operator_signs_in_and_watches_a_job_progress_live(page, live_server, token, tmp_path):
    job = JobFactory(
        kind="maintenance_reindex", state=JobState.RUNNING, started_at=timezone.now(),
        heartbeat_at=timezone.now(), progress_total=4, progress_current=1, message="reindexing jobs_job",
    )  # fmt: skip
    page.goto(f"{live_server.url}/jobs")
    assert "/login" in page.url
    page.fill("#token", token)
    page.click("button[type=submit]")
    page.wait_for_url(f"{live_server.url}/jobs")
    row = page.locator(f"tr[data-job='{job.pk}']")
    assert "maintenance_reindex" in row.inner_text() and "1 / 4" in row.inner_text()

    # The list polls: progress written by the job shows up without a reload.
    Job.objects.filter(pk=job.pk).update(progress_current=3, heartbeat_at=timezone.now())
    page.wait_for_function(  # a function, not an expression: the screens' CSP forbids eval()
        f"() => document.querySelector(\"tr[data-job='{job.pk}']\").innerText.includes('3 / 4')", timeout=10000
    )

    row.locator("a").click()
    page.wait_for_url(f"{live_server.url}/jobs/{job.pk}")
    assert page.inner_text("#job-state") == "running"
    Job.objects.filter(pk=job.pk).update(state=JobState.SUCCEEDED, progress_current=4, finished_at=timezone.now())
    page.wait_for_function("() => document.querySelector('#job-state').innerText === 'succeeded'", timeout=10000)
    assert "4 / 4" in page.inner_text("#job-progress")
    page.screenshot(path=tmp_path / "jobs-screen.png", full_page=True)
