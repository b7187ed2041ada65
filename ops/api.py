"""GET /healthz: liveness: status, database.reachable and the conversion sandbox's state."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django_prometheus.exports import ExportToDjangoView
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from accounts.lockout import token_check
from config.api.auth import TOKEN_HEADER, TOKEN_QUERY, client_address
from config.api.errors import problem_json_response
from config.api.views import PublicApiView, TokenApiView
from config.errors import TooManyRequests
from ops.health import health
from ops.queries import liveness
from ops.serializers import HealthSerializer, LivenessSerializer


class HealthzApi(PublicApiView):
    @extend_schema(
        operation_id="healthz",
        summary="Liveness: status, whether the database is reachable, and whether conversions run sandboxed",
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
    return ExportToDjangoView(request)


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


# --- end detailed health ---
