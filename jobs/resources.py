"""The API endpoints of jobs, declared (config.resources): the jobs, one job, and the maintenance
endpoints that start jobs. The screens share the reads (jobs.views)."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from drf_spectacular.utils import OpenApiParameter
from rest_framework import status

from config.resources import Action, Read
from jobs.actions import tables_analyze_start, tables_reindex_start
from jobs.models import Job
from jobs.queries import job_get, job_list
from jobs.serializers import JobAckSerializer, JobListParamsSerializer, JobSerializer

JobsRead = partial(Read, tag="jobs")


def started(start: Callable[..., tuple[Job, bool]]) -> Callable[..., dict[str, Any]]:
    """The act of a maintenance endpoint: `start` the job (the action journals it) for the view's caller."""

    def act(view: Any, request: Any) -> dict[str, Any]:
        job, created = start(actor=view.actor_name())
        return {"job": job, "created": created}

    return act


MaintenanceAction = partial(
    Action, method="post", tag="maintenance", answer=JobAckSerializer, status=status.HTTP_202_ACCEPTED
)

job_list_read = JobsRead(
    route="jobs", name="api-jobs",
    operation_id="jobs_list", summary="List background jobs, newest first, each with health and duration_seconds",
    params=JobListParamsSerializer, answer=JobSerializer, many=True, problems=(400,),
    fetch=lambda query: job_list(**query),
)  # fmt: skip
job_detail = JobsRead(
    route="jobs/<str:uuid>", name="api-job",
    operation_id="jobs_retrieve", summary="One background job by uuid",
    parameters=(OpenApiParameter("uuid", str, OpenApiParameter.PATH),), answer=JobSerializer,
    fetch=lambda query, uuid: job_get(uuid),
)  # fmt: skip


def maintenance(kind: str, summary: str, start: Callable[..., tuple[Job, bool]]) -> Action:
    """POST /api/maintenance/<kind>: start the maintenance job `start` begins (debounced)."""
    return MaintenanceAction(
        route=f"maintenance/{kind}", name=f"api-maintenance-{kind}", operation_id=f"maintenance_{kind}",
        summary=summary, act=started(start),
    )  # fmt: skip


reindex = maintenance(
    "reindex", "Start the online index rebuild of the high-churn tables (debounced job)", tables_reindex_start
)
analyze = maintenance(
    "analyze", "Start the planner-statistics refresh of the high-churn tables (debounced job)", tables_analyze_start
)
