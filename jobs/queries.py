"""Reads of jobs, shared by the API and the screens."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta

from django.core.exceptions import ValidationError
from django.db.models import F, Q, QuerySet
from django.db.models.functions import Coalesce
from django.utils import timezone

from config.errors import NotFound
from config.live import get_config
from jobs.choices import ACTIVE_STATES, FAILED_STATES
from jobs.models import Job


def job_list(*, active: bool = False, limit: int = 50, kinds: Sequence[str] = ()) -> QuerySet[Job]:
    """Newest first; `active` narrows to queued and running jobs, `kinds` to those kinds."""
    jobs = Job.objects.all()
    if active:
        jobs = jobs.filter(state__in=ACTIVE_STATES)
    if kinds:
        jobs = jobs.filter(kind__in=kinds)
    return jobs.order_by("-created_at")[:limit]


def job_get(job_id: str) -> Job:
    """The job with this uuid, or NotFound (also for a malformed uuid)."""
    try:
        return Job.objects.get(pk=job_id)
    except (Job.DoesNotExist, ValidationError, ValueError) as exc:  # ValidationError: malformed uuid
        raise NotFound(f"No job {job_id}.") from exc


def jobs_in_trouble(*, failed_within: timedelta, limit: int = 20) -> QuerySet[Job]:
    """Active jobs with no sign of life for over JOB_STALL_SECONDS (stalled) and jobs that failed or were
    interrupted within `failed_within`, newest first."""
    now = timezone.now()
    stalled = Q(state__in=ACTIVE_STATES, last_sign__lt=now - timedelta(seconds=get_config().JOB_STALL_SECONDS))
    failed = Q(state__in=FAILED_STATES, finished_at__gte=now - failed_within)
    jobs = Job.objects.annotate(last_sign=Coalesce(F("heartbeat_at"), F("created_at")))
    return jobs.filter(stalled | failed).order_by("-created_at")[:limit]
