"""GET /api/audit: the operational journal of authenticated writes."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from accounts.queries import audit_list
from accounts.serializers import AuditEntrySerializer, AuditListParamsSerializer
from config.api.schema import problems
from config.api.views import TokenApiView


class AuditListApi(TokenApiView):
    @extend_schema(
        operation_id="audit_list",
        summary="The operational journal: every authenticated write, newest first",
        parameters=[AuditListParamsSerializer],
        responses={200: AuditEntrySerializer(many=True), **problems(400)},
        tags=["management"],
    )
    def get(self, request: Request) -> Response:
        params = AuditListParamsSerializer(data=request.query_params)
        params.is_valid(raise_exception=True)
        return Response(AuditEntrySerializer(audit_list(**params.validated_data), many=True).data)
