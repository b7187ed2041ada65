"""GET /healthz (liveness: status and database.reachable) and GET /metrics. The operations endpoints
(health, status, statistics, logs, configuration) are declared in ops.resources."""

from __future__ import annotations

import logging

from django.http import HttpRequest, HttpResponse
from django_prometheus.exports import ExportToDjangoView
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from accounts.api_base import PublicApiView
from accounts.lockout import token_check
from config.api.errors import problem_json_response
from config.api.requests import TOKEN_HEADER, TOKEN_QUERY, client_address
from config.errors import TooManyRequests
from ops.metrics import collector_register
from ops.queries import liveness
from ops.serializers import LivenessSerializer

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
