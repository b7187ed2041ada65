"""API twins of the jobs screens, and the maintenance endpoints that start jobs."""

from __future__ import annotations

from collections.abc import Callable

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response

from accounts.api_base import TokenApiView
from config.api.schema import problems
from jobs.actions import tables_analyze_start, tables_reindex_start
from jobs.models import Job
from jobs.queries import job_get, job_list
from jobs.serializers import JobAckSerializer, JobListParamsSerializer, JobSerializer


class JobListApi(TokenApiView):
    @extend_schema(
        operation_id="jobs_list",
        summary="List background jobs, newest first, each with health and duration_seconds",
        parameters=[JobListParamsSerializer],
        responses={200: JobSerializer(many=True), **problems(400)},
        tags=["jobs"],
    )
    def get(self, request: Request) -> Response:
        params = JobListParamsSerializer(data=request.query_params)
        params.is_valid(raise_exception=True)
        jobs = job_list(**params.validated_data)
        return Response(JobSerializer(jobs, many=True).data)


class JobDetailApi(TokenApiView):
    @extend_schema(
        operation_id="jobs_retrieve",
        summary="One background job by uuid",
        parameters=[OpenApiParameter("uuid", str, OpenApiParameter.PATH)],
        responses={200: JobSerializer, **problems(404)},
        tags=["jobs"],
    )
    def get(self, request: Request, uuid: str) -> Response:
        return Response(JobSerializer(job_get(uuid)).data)


class _MaintenanceApi(TokenApiView):
    start: Callable[..., tuple[Job, bool]]  # the action that starts the job (and journals it)

    def post(self, request: Request) -> Response:
        job, created = self.start(actor=self.actor_name())
        body = JobAckSerializer({"job": job, "created": created}).data
        return Response(body, status=status.HTTP_202_ACCEPTED)


class MaintenanceReindexApi(_MaintenanceApi):
    start = staticmethod(tables_reindex_start)

    @extend_schema(
        operation_id="maintenance_reindex",
        summary="Start the online index rebuild of the high-churn tables (debounced job)",
        request=None,
        responses={202: JobAckSerializer},
        tags=["maintenance"],
    )
    def post(self, request: Request) -> Response:
        return super().post(request)


class MaintenanceAnalyzeApi(_MaintenanceApi):
    start = staticmethod(tables_analyze_start)

    @extend_schema(
        operation_id="maintenance_analyze",
        summary="Start the planner-statistics refresh of the high-churn tables (debounced job)",
        request=None,
        responses={202: JobAckSerializer},
        tags=["maintenance"],
    )
    def post(self, request: Request) -> Response:
        return super().post(request)
