"""Reads of jobs, shared by the API and the screens."""

from __future__ import annotations

from collections.abc import Sequence

from django.core.exceptions import ValidationError
from django.db.models import QuerySet

from config.errors import NotFound
from jobs.choices import ACTIVE_STATES
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
