"""Job kinds and beat tasks of the reports app."""

from __future__ import annotations

from typing import Any

from celery import shared_task

from corpora.actions import reports as actions
from corpora.grains import grain_slice_rebuild
from corpora.queries import reports as queries
from jobs.actions import job_enqueue
from jobs.choices import JobKinds, JobLanes
from jobs.registry import job_kind
from jobs.runner import JobContext


# Rebuilding a slice replaces it: every kind here is safe to run again whole.
@job_kind(JobKinds.REPORTS_REFRESH, debounced=True, rerun=True)
def reports_refresh(ctx: JobContext) -> dict[str, Any]:
    """Rebuild the report rollup behind every report page."""
    return actions.reports_rebuild_all(progress=ctx.progress, log=ctx.log)


@job_kind(JobKinds.REPORT_SLICE_BUILD, rerun=True)
def report_slice_build(ctx: JobContext, *, corpus_id: int, service_id: int, severity: str) -> dict[str, Any]:
    """Build one (corpus, service, severity) slice that did not fit a page's time budget."""
    ctx.progress(0, 1, f"building the {severity} slice")
    rows = grain_slice_rebuild(corpus_id, service_id, severity)
    return {"rows": rows}


# Its VACUUM takes the lock that ANALYZE and REINDEX take, so it runs in their lane.
@job_kind(JobKinds.MESSAGES_PURGE, debounced=True, rerun=True, lane=JobLanes.MAINTENANCE)
def messages_purge(ctx: JobContext) -> dict[str, Any]:
    """Delete the rows of the messages that reruns retired, in batches."""
    return actions.retired_messages_purge(progress=ctx.progress, log=ctx.log)


@shared_task(name="reports.tasks.messages_purge_scheduled", ignore_result=True)
def messages_purge_scheduled() -> str | None:
    """Beat: start a purge when reruns left retired messages (debounced: a running purge takes those
    retired while it runs too)."""
    if not queries.retired_messages_left():
        return None
    job, _ = job_enqueue(kind=JobKinds.MESSAGES_PURGE, actor="beat")
    return str(job.pk)


@shared_task(name="reports.tasks.reports_refresh_scheduled", ignore_result=True)
def reports_refresh_scheduled() -> str:
    """Beat: start the global refresh (debounced: a running one is reused)."""
    job, _ = job_enqueue(kind=JobKinds.REPORTS_REFRESH, actor="beat")
    return str(job.pk)
