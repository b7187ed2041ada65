"""The one runner every background job goes through: claim, run, report progress, finish.

A kind's function receives a JobContext and its params. It raises JobFailed (or a ServiceError)
for an expected failure; anything else is an internal error, logged with its traceback, while
the job row shows a one-line message.
"""

from __future__ import annotations

import logging
import os
import socket
import time
import uuid
from typing import Any

import psutil
from django.db import connections
from django.db.models import F
from django.db.models.functions import Coalesce
from django.utils import timezone

from config.errors import ServiceError
from config.logs import request_id_var
from jobs.choices import JobState
from jobs.models import Job
from jobs.registry import job_kind_get

logger = logging.getLogger(__name__)

LOG_LINES_KEPT = 200
# A connection of its own, so progress shows while the job's work sits in an open transaction.
PROGRESS_DB = "progress"
_PROGRESS_INTERVAL = 0.5  # seconds between progress writes, so tight loops do not hammer the row


class JobFailed(Exception):
    """An expected failure: the job ends `failed` with this message."""


def worker_identity() -> str:
    """host:pid:start-time of this process; the start time guards against pid reuse."""
    pid = os.getpid()
    started = int(psutil.Process(pid).create_time())
    return f"{socket.gethostname()}:{pid}:{started}"


class JobContext:
    """What a running job may do to its own row: report progress and append log lines."""

    def __init__(self, job: Job) -> None:
        self.job = job
        self._last_write = 0.0

    @property
    def uuid(self) -> uuid.UUID:
        return self.job.uuid

    def progress(self, current: int, total: int | None = None, message: str | None = None) -> None:
        """Record progress (and a heartbeat); writes are throttled except for the last step."""
        now = time.monotonic()
        final = total is not None and current >= total
        if not final and now - self._last_write < _PROGRESS_INTERVAL:
            return
        self._last_write = now
        fields: dict[str, Any] = {"progress_current": current, "heartbeat_at": timezone.now()}
        if total is not None:
            fields["progress_total"] = total
        if message is not None:
            fields["message"] = message[:500]
        Job.objects.using(PROGRESS_DB).filter(pk=self.job.pk).update(**fields)

    def log(self, line: str) -> None:
        """Append a line to the job's log (the newest LOG_LINES_KEPT are kept)."""
        stamped = f"{timezone.now():%H:%M:%S} {line}"[:1000]
        with connections[PROGRESS_DB].cursor() as cursor:
            cursor.execute(
                """
                UPDATE jobs_job
                   SET log = (CASE WHEN jsonb_array_length(log) >= %s
                                   THEN log - 0 ELSE log END) || jsonb_build_array(%s::text),
                       heartbeat_at = now()
                 WHERE uuid = %s
                """,
                [LOG_LINES_KEPT, stamped, self.job.pk],
            )
        logger.info("job %s: %s", self.job.kind, line)


def job_run(job_id: str | uuid.UUID) -> str:
    """Run a queued job once; returns the final state. A job not in `queued` is left alone."""
    now = timezone.now()
    claimed = Job.objects.filter(pk=job_id, state=JobState.QUEUED).update(
        state=JobState.RUNNING, started_at=now, heartbeat_at=now, worker=worker_identity()
    )
    if not claimed:
        logger.info("job %s is not queued any more; nothing to run", job_id)
        return Job.objects.filter(pk=job_id).values_list("state", flat=True).first() or "missing"
    job = Job.objects.get(pk=job_id)
    token = request_id_var.set(f"job-{job.pk.hex[:12]}")
    try:
        return _run_claimed(job)
    finally:
        request_id_var.reset(token)


def _run_claimed(job: Job) -> str:
    kind = job_kind_get(job.kind)
    context = JobContext(job)
    state, message, result = JobState.SUCCEEDED, "", None
    if kind is None:
        state, message = JobState.FAILED, f"unknown job kind {job.kind!r}"
    else:
        try:
            result = kind.function(context, **job.params)
        except (JobFailed, ServiceError) as exc:
            state, message = JobState.FAILED, str(exc)
        except Exception as exc:
            logger.exception("job %s %s crashed", job.kind, job.pk)
            state, message = JobState.FAILED, f"internal error: {type(exc).__name__}: {exc}"
    finished = {"state": state, "finished_at": timezone.now(), "heartbeat_at": timezone.now()}
    if message:
        finished["message"] = message[:500]
    elif state == JobState.SUCCEEDED:
        finished["message"] = "done"
        # A job that counted its work ends at 100% even if its last progress write was throttled.
        finished["progress_current"] = Coalesce(F("progress_total"), F("progress_current"))
    Job.objects.filter(pk=job.pk).update(result=result, **finished)
    logger.info("job %s %s ended %s %s", job.kind, job.pk, state, message)
    return state
