"""A screen session opened with a service token ends when that token is revoked, one opened with a passkey
when the passkey is revoked or its actor holds no active token any more (accounts.queries.passkey_signs_in);
a live one has its last-seen time kept (at most once a minute)."""

from __future__ import annotations

from collections.abc import Callable

from django.contrib.auth import logout
from django.http import HttpRequest, HttpResponse

from accounts.actions import screen_session_touch
from accounts.models import ApiToken
from accounts.queries import passkey_signs_in

SESSION_TOKEN_KEY = "service_token_id"
SESSION_PASSKEY_KEY = "passkey_id"


class TokenSessionMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        token_id = request.session.get(SESSION_TOKEN_KEY) if hasattr(request, "session") else None
        passkey_id = request.session.get(SESSION_PASSKEY_KEY) if hasattr(request, "session") else None
        if request.user.is_authenticated and (
            (token_id is not None and not ApiToken.objects.filter(pk=token_id, revoked_at__isnull=True).exists())
            or (passkey_id is not None and not passkey_signs_in(passkey_id))
        ):
            logout(request)
        elif request.user.is_authenticated and request.session.session_key:
            screen_session_touch(request.session.session_key)
        return self.get_response(request)
