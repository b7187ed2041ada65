"""GET /healthz (liveness: status and database.reachable), GET /metrics, and the token-gated operations
endpoints (health, status, statistics, logs, configuration)."""

from __future__ import annotations

import logging
from dataclasses import replace

from django.http import HttpRequest, HttpResponse
from django_prometheus.exports import ExportToDjangoView
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from accounts.api_base import PublicApiView, TokenApiView
from accounts.lockout import token_check
from config.api.errors import problem_json_response
from config.api.requests import TOKEN_HEADER, TOKEN_QUERY, client_address
from config.api.schema import problems
from config.errors import TooManyRequests
from ops.actions import config_update
from ops.configuration import effective_config
from ops.health import health
from ops.metrics import collector_register
from ops.queries import dashboard, liveness, log_records, run_statistics, system_status
from ops.serializers import (
    ConfigChangeSerializer,
    ConfigSerializer,
    DashboardSerializer,
    HealthSerializer,
    LivenessSerializer,
    LogsParamsSerializer,
    LogsSerializer,
    PairStatisticsSerializer,
    StatisticsParamsSerializer,
    StatusSerializer,
)

logger = logging.getLogger(__name__)


class HealthzApi(PublicApiView):
    @extend_schema(
        operation_id="healthz",
        summary="Liveness: status and whether the database is reachable (the sandbox is a check of GET /api/health)",
        responses={
            200: LivenessSerializer,
            503: OpenApiResponse(LivenessSerializer, description="The database does not answer"),
        },
        tags=["management"],
    )
    def get(self, request: Request) -> Response:
        body = LivenessSerializer(liveness()).data
        return Response(body, status=200 if body["database"]["reachable"] else 503)


def metrics_view(request: HttpRequest) -> HttpResponse:
    """GET /metrics (text exposition format), gated like the API: header X-Service-Token or ?token=."""
    raw = request.headers.get(TOKEN_HEADER) or request.GET.get(TOKEN_QUERY) or ""
    try:
        token = token_check(raw, client_address(request)) if raw else None
    except TooManyRequests as exc:
        response = problem_json_response(429, exc.detail)
        response["Retry-After"] = str(exc.retry_after)
        return response
    if token is None:
        response = problem_json_response(401, "A valid service token is required for /metrics.")
        response["WWW-Authenticate"] = 'ServiceToken realm="api"'
        return response
    collector_register()
    exposition: HttpResponse = ExportToDjangoView(request)  # django_prometheus has no types
    return exposition


# --- status and statistics ---


class StatusApi(PublicApiView):
    @extend_schema(
        operation_id="status",
        summary="Status: corpora, the active worker fleet per service, the pending conversion backlog, the latest run",
        responses={200: StatusSerializer},
        tags=["management"],
    )
    def get(self, request: Request) -> Response:
        return Response(StatusSerializer(system_status()).data)


class DashboardApi(PublicApiView):
    @extend_schema(
        operation_id="dashboard",
        summary="The operator's dashboard: the status record, open runs with progress, rate and ETA, backlog per "
        "service, stalled and failed jobs, health problems",
        responses={200: DashboardSerializer},
        tags=["management"],
    )
    def get(self, request: Request) -> Response:
        return Response(DashboardSerializer(dashboard()).data)


class StatisticsApi(PublicApiView):
    @extend_schema(
        operation_id="statistics",
        summary="Run statistics per (corpus, service): runs, durations, throughput, per-status trend",
        parameters=[StatisticsParamsSerializer],
        responses={200: PairStatisticsSerializer(many=True), **problems(400, 404)},
        tags=["management"],
    )
    def get(self, request: Request) -> Response:
        checked = StatisticsParamsSerializer(data=request.query_params)
        checked.is_valid(raise_exception=True)
        return Response(PairStatisticsSerializer(run_statistics(**checked.validated_data), many=True).data)


# --- detailed health ---
class HealthApi(TokenApiView):
    @extend_schema(
        operation_id="health",
        summary="Detailed health: each check ok, warning or problem, with a remediation for each that is not ok",
        responses={200: HealthSerializer},
        tags=["management"],
    )
    def get(self, request: Request) -> Response:
        return Response(HealthSerializer(health()).data)


# --- logs ---
class LogsApi(TokenApiView):
    @extend_schema(
        operation_id="logs",
        summary="Recent log records of every process (web, jobs, dispatcher, workers), newest first, filtered",
        parameters=[LogsParamsSerializer],
        responses={200: LogsSerializer, **problems(400)},
        tags=["management"],
    )
    def get(self, request: Request) -> Response:
        checked = LogsParamsSerializer(data=request.query_params)
        checked.is_valid(raise_exception=True)
        return Response(LogsSerializer(log_records(**checked.validated_data)).data)


# --- configuration ---
class ConfigApi(TokenApiView):
    @extend_schema(
        operation_id="config",
        summary="The effective configuration, each value with its source (default, environment, api); masked",
        responses={200: ConfigSerializer},
        tags=["management"],
    )
    def get(self, request: Request) -> Response:
        return Response(ConfigSerializer(effective_config()).data)

    @extend_schema(
        operation_id="config_set",
        summary="Deep-merge a partial configuration (nested keys merge, lists are replaced, null resets a key)",
        request={"application/json": {"type": "object", "additionalProperties": True}},
        responses={200: ConfigChangeSerializer, **problems(400)},
        tags=["management"],
    )
    def put(self, request: Request) -> Response:
        change = config_update(request.data, actor=self.actor_name())
        return Response(ConfigChangeSerializer(replace(change, configuration=effective_config())).data)
