"""The API endpoints of accounts, declared (config.resources): the operational journal of authenticated
writes; the signed-in screen sessions and their revocation; the caller's passkeys, renamed and revoked
(they are registered in a browser, at /passkeys). The screens share the reads (accounts.views)."""

from __future__ import annotations

from functools import partial

from rest_framework import status

from accounts import serializers as s
from accounts.actions import passkey_rename, passkey_revoke, screen_session_revoke
from accounts.queries import audit_list, passkey_list, screen_session_list
from config.resources import Action, Read

Managed = partial(Read, tag="management")
ManagedAction = partial(Action, tag="management")

audit = Managed(
    route="audit", name="api-audit",
    operation_id="audit_list", summary="The operational journal: every authenticated write, newest first",
    params=s.AuditListParamsSerializer, answer=s.AuditEntrySerializer, many=True, problems=(400,),
    fetch=lambda query: audit_list(**query),
)  # fmt: skip

# --- sessions ---
sessions = Managed(
    route="sessions", name="api-sessions",
    operation_id="sessions_list", summary="The signed-in screen sessions: actor, started, last seen, client address",
    answer=s.ScreenSessionSerializer, many=True, problems=(), fetch=lambda query: screen_session_list(),
)  # fmt: skip
session_revoke = ManagedAction(
    route="sessions/<int:id>", name="api-session", method="delete",
    operation_id="sessions_revoke",
    summary="Revoke a screen session: it ends at once, the browser's next request is signed out",
    status=status.HTTP_204_NO_CONTENT, problems=(404,),
    act=lambda view, request, id: screen_session_revoke(id, actor=view.actor_name()),
)  # fmt: skip

# --- passkeys ---
passkeys = ManagedAction(
    route="passkeys", name="api-passkeys", method="get",
    operation_id="passkeys_list",
    summary="The active passkeys of the token's actor, newest first (registered in a browser at /passkeys)",
    answer=s.PasskeySerializer, many=True, act=lambda view, request: passkey_list(view.actor_name()),
)  # fmt: skip
passkey_rename_action = ManagedAction(
    route="passkeys/<int:id>", name="api-passkey", method="patch",
    operation_id="passkeys_rename", summary="Rename one of the actor's active passkeys",
    request=s.PasskeyNameSerializer, answer=s.PasskeySerializer, problems=(400, 404),
    act=lambda view, request, id: passkey_rename(
        id, actor=view.actor_name(), submitted=s.PasskeyNameSerializer(data=request.data)
    ),
)  # fmt: skip
passkey_revoke_action = ManagedAction(
    route="passkeys/<int:id>", name="api-passkey", method="delete",
    operation_id="passkeys_revoke",
    summary="Revoke one of the actor's active passkeys: it signs no one in again, and the screen sessions"
    " opened with it end at their next request",
    status=status.HTTP_204_NO_CONTENT, problems=(404,),
    act=lambda view, request, id: passkey_revoke(id, actor=view.actor_name()),
)  # fmt: skip
