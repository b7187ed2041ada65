"""GET /api/audit: the operational journal of authenticated writes. GET /api/sessions, DELETE
/api/sessions/{id}: the signed-in screen sessions and their revocation. GET /api/passkeys, PATCH and DELETE
/api/passkeys/{id}: the caller's passkeys, renamed and revoked (they are registered in a browser, at
/passkeys)."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response

from accounts.actions import passkey_rename, passkey_revoke, screen_session_revoke
from accounts.api_base import TokenApiView
from accounts.queries import audit_list, passkey_list, screen_session_list
from accounts.serializers import (
    AuditEntrySerializer,
    AuditListParamsSerializer,
    PasskeyNameSerializer,
    PasskeySerializer,
    ScreenSessionSerializer,
)
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


# --- passkeys ---
class PasskeyListApi(TokenApiView):
    @extend_schema(
        operation_id="passkeys_list",
        summary="The active passkeys of the token's actor, newest first (registered in a browser at /passkeys)",
        responses={200: PasskeySerializer(many=True)},
        tags=["management"],
    )
    def get(self, request: Request) -> Response:
        return Response(PasskeySerializer(passkey_list(self.actor_name()), many=True).data)


class PasskeyDetailApi(TokenApiView):
    @extend_schema(
        operation_id="passkeys_rename",
        summary="Rename one of the actor's active passkeys",
        request=PasskeyNameSerializer,
        responses={200: PasskeySerializer, **problems(400, 404)},
        tags=["management"],
    )
    def patch(self, request: Request, id: int) -> Response:
        passkey = passkey_rename(id, actor=self.actor_name(), submitted=PasskeyNameSerializer(data=request.data))
        return Response(PasskeySerializer(passkey).data)

    @extend_schema(
        operation_id="passkeys_revoke",
        summary="Revoke one of the actor's active passkeys: it signs no one in again, and the screen sessions"
        " opened with it end at their next request",
        responses={204: None, **problems(404)},
        tags=["management"],
    )
    def delete(self, request: Request, id: int) -> Response:
        passkey_revoke(id, actor=self.actor_name())
        return Response(status=status.HTTP_204_NO_CONTENT)
