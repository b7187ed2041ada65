"""GET /api/audit: the operational journal of authenticated writes. GET /api/sessions, DELETE
/api/sessions/{id}: the signed-in screen sessions and their revocation."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response

from accounts.actions import screen_session_revoke
from accounts.api_base import TokenApiView
from accounts.queries import audit_list, screen_session_list
from accounts.serializers import AuditEntrySerializer, AuditListParamsSerializer, ScreenSessionSerializer
from config.api.schema import problems


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


# --- sessions ---
class SessionListApi(TokenApiView):
    @extend_schema(
        operation_id="sessions_list",
        summary="The signed-in screen sessions: actor, started, last seen, client address",
        responses={200: ScreenSessionSerializer(many=True)},
        tags=["management"],
    )
    def get(self, request: Request) -> Response:
        return Response(ScreenSessionSerializer(screen_session_list(), many=True).data)


class SessionDetailApi(TokenApiView):
    @extend_schema(
        operation_id="sessions_revoke",
        summary="Revoke a screen session: it ends at once, the browser's next request is signed out",
        responses={204: None, **problems(404)},
        tags=["management"],
    )
    def delete(self, request: Request, id: int) -> Response:
        screen_session_revoke(id, actor=self.actor_name())
        return Response(status=status.HTTP_204_NO_CONTENT)
