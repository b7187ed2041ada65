"""GET /healthz: liveness, with nothing more than status and database.reachable."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from config.api.views import PublicApiView
from ops.queries import liveness
from ops.serializers import LivenessSerializer


class HealthzApi(PublicApiView):
    @extend_schema(
        operation_id="healthz",
        summary="Liveness: status and whether the database is reachable",
        responses={
            200: LivenessSerializer,
            503: OpenApiResponse(LivenessSerializer, description="The database does not answer"),
        },
        tags=["management"],
    )
    def get(self, request: Request) -> Response:
        body = LivenessSerializer(liveness()).data
        return Response(body, status=200 if body["database"]["reachable"] else 503)
