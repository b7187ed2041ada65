"""Writes on jobs: enqueue (debounced where the kind says so), the maintenance an operator starts
(journaled), and the sweep that finds dead ones."""

from __future__ import annotations

import logging
import socket
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import psutil
from django.apps import apps
from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from accounts.actions import journaled
from accounts.choices import Action
from config.celery import app as celery_app
from jobs.choices import ACTIVE_STATES, RUN_JOB_TASK, JobKinds, JobState
from jobs.models import Job
from jobs.registry import job_kind_get

logger = logging.getLogger(__name__)

REQUEUE_AFTER = timedelta(seconds=30)


def job_enqueue(*, kind: str, actor: str, params: dict[str, Any] | None = None, send: bool = True) -> tuple[Job, bool]:
    """Create a queued job and send it to Celery once the surrounding transaction commits.

    Returns (job, created). For a debounced kind an active job of that kind is returned instead
    of a new one, with created False. With send=False the caller runs the job itself (commands).
    """
    definition = job_kind_get(kind)
    if definition is None:
        raise ValueError(f"unknown job kind {kind!r}")
    fields = {"kind": kind, "actor": actor, "params": params or {}}
    if definition.debounced:
        existing = Job.objects.filter(debounce_key=kind, state__in=ACTIVE_STATES).first()
        if existing:
            return existing, False
        try:
            with transaction.atomic():
                job = Job.objects.create(debounce_key=kind, **fields)
        except IntegrityError:  # another request created it between our look and our insert
            return Job.objects.get(debounce_key=kind, state__in=ACTIVE_STATES), False
    else:
        job = Job.objects.create(**fields)
    if send:
        transaction.on_commit(lambda: job_send(job.pk))
    return job, True


def job_send(job_id: Any) -> bool:
    """Hand a job to Celery. If the broker is down the job stays queued and the sweep resends it. The task
    is named, not imported: jobs/tasks.py, which defines it, calls these actions."""
    try:
        celery_app.send_task(RUN_JOB_TASK, args=[str(job_id)], retry=False)
    except Exception as exc:
        logger.warning("could not send job %s to the broker (%s); the sweep will resend it", job_id, exc)
        return False
    return True


def _process_alive(worker: str) -> bool | None:
    """True/False for a worker on this host; None when it runs elsewhere (not ours to judge)."""
    host, _, rest = worker.partition(":")
    if host != socket.gethostname() or not rest:
        return None
    pid_text, _, started_text = rest.partition(":")
    try:
        process = psutil.Process(int(pid_text))
        if process.status() == psutil.STATUS_ZOMBIE:
            return False
        return int(process.create_time()) == int(started_text or 0)
    except (psutil.NoSuchProcess, ValueError):
        return False


def jobs_interrupt_dead() -> int:
    """Mark running jobs whose process on this host has died as interrupted."""
    count = 0
    for job in Job.objects.filter(state=JobState.RUNNING).only("uuid", "worker"):
        if _process_alive(job.worker) is False:
            count += Job.objects.filter(pk=job.pk, state=JobState.RUNNING).update(
                state=JobState.INTERRUPTED,
                finished_at=timezone.now(),
                message=f"interrupted: the worker process {job.worker} died",
            )
    if count:
        logger.warning("marked %d job(s) interrupted: their worker died", count)
    return count


def jobs_requeue_orphans() -> int:
    """Resend queued jobs that no worker has picked up (a lost message or a broker restart).

    Resending is safe: the runner claims a job only while it is still queued.
    """
    cutoff = timezone.now() - REQUEUE_AFTER
    orphans = list(Job.objects.filter(state=JobState.QUEUED, created_at__lt=cutoff).values_list("pk", flat=True))
    return sum(job_send(pk) for pk in orphans)


def jobs_sweep() -> dict[str, int]:
    """The periodic housekeeping of jobs (Celery beat, and each worker at start)."""
    return {"interrupted": jobs_interrupt_dead(), "requeued": jobs_requeue_orphans()}


# Tables whose rows change most.
HIGH_CHURN_MODELS = [
    "corpora.Task",
    "corpora.TaskCount",
    "corpora.TaskMessages",
    "corpora.TaskClass",
    "corpora.MessageTally",
    "corpora.TaskRuntime",
    "corpora.RuntimeCount",
    "corpora.RuntimeBin",
    "corpora.ReportGrain",
    "corpora.GrainSlice",
    "jobs.Job",
    "accounts.AuditEntry",
    "django_celery_beat.PeriodicTask",
]


def _high_churn_tables() -> list[str]:
    return [apps.get_model(label)._meta.db_table for label in HIGH_CHURN_MODELS]


@journaled(Action.MAINTENANCE_REINDEX)
def tables_reindex_start(*, actor: str) -> tuple[Job, bool]:
    """Start the online index rebuild of the high-churn tables (a debounced job: a running one is returned)."""
    return job_enqueue(kind=JobKinds.MAINTENANCE_REINDEX, actor=actor)


@journaled(Action.MAINTENANCE_ANALYZE)
def tables_analyze_start(*, actor: str) -> tuple[Job, bool]:
    """Start the planner-statistics refresh of the high-churn tables (a debounced job)."""
    return job_enqueue(kind=JobKinds.MAINTENANCE_ANALYZE, actor=actor)


@dataclass(frozen=True)
class TablesDone:
    """What a maintenance job went through (its job result): the tables, in order."""

    tables: list[str]


def tables_reindex(*, progress: Any, log: Any) -> TablesDone:
    """Rebuild the indexes of the high-churn tables with REINDEX CONCURRENTLY (no exclusive lock)."""
    return _per_table("REINDEX TABLE CONCURRENTLY {}", "reindexed", progress=progress, log=log)


def tables_analyze(*, progress: Any, log: Any) -> TablesDone:
    """Refresh the planner statistics of the high-churn tables."""
    return _per_table("ANALYZE {}", "analyzed", progress=progress, log=log)


def _per_table(statement: str, verb: str, *, progress: Any, log: Any) -> TablesDone:
    tables = _high_churn_tables()
    done: list[str] = []
    for index, table in enumerate(tables):
        progress(index, len(tables), f"{verb[:-2]}ing {table}")
        started = timezone.now()
        with connection.cursor() as cursor:  # autocommit: REINDEX CONCURRENTLY refuses a transaction
            cursor.execute(statement.format(connection.ops.quote_name(table)))
        log(f"{verb} {table} in {(timezone.now() - started).total_seconds():.2f}s")
        done.append(table)
    progress(len(tables), len(tables), f"{verb} {len(tables)} tables")
    return TablesDone(tables=done)
