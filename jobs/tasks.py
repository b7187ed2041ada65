"""Celery tasks of the jobs app and the job kinds it owns (maintenance)."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from celery import shared_task
from celery.signals import task_prerun, worker_ready

from jobs import actions
from jobs.choices import RUN_JOB_TASK, JobKinds, JobLanes
from jobs.registry import job_kind
from jobs.runner import JobContext, job_run


@shared_task(name=RUN_JOB_TASK, ignore_result=True)
def run_job(job_id: str) -> str:
    """Run one job by id through the shared runner."""
    return job_run(job_id)


@shared_task(name="jobs.tasks.jobs_sweep", ignore_result=True)
def jobs_sweep() -> dict[str, int]:
    """Mark jobs of dead workers interrupted and resend jobs nobody picked up."""
    return actions.jobs_sweep()


@task_prerun.connect
def _config_refresh_before_task(**_: Any) -> None:
    from config.live import config_refresh

    config_refresh()  # the configuration overrides, at most one query every few seconds


@worker_ready.connect
def _sweep_at_worker_start(**_: Any) -> None:
    # A worker that starts may be replacing one that died with jobs in hand.
    actions.jobs_sweep()


# Each table is one statement of its own: run again, the tables done are done again, which is harmless.
@job_kind(JobKinds.MAINTENANCE_REINDEX, debounced=True, rerun=True, lane=JobLanes.MAINTENANCE)
def maintenance_reindex(ctx: JobContext) -> dict[str, Any]:
    """Rebuild the indexes of the high-churn tables online, table by table."""
    return asdict(actions.tables_reindex(progress=ctx.progress, log=ctx.log))


@job_kind(JobKinds.MAINTENANCE_ANALYZE, debounced=True, rerun=True, lane=JobLanes.MAINTENANCE)
def maintenance_analyze(ctx: JobContext) -> dict[str, Any]:
    """Refresh planner statistics of the high-churn tables."""
    return asdict(actions.tables_analyze(progress=ctx.progress, log=ctx.log))
