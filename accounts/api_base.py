"""Base classes for the API: public views ignore tokens; gated views demand one. A write is journaled by
the action it calls (accounts.actions.journaled); a gated view tells it what the request sent and the
status it answered (journal_request)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.http import HttpRequest
from django.http.response import HttpResponseBase
from rest_framework.authentication import BaseAuthentication
from rest_framework.exceptions import APIException, NotAuthenticated
from rest_framework.permissions import SAFE_METHODS, AllowAny, BasePermission
from rest_framework.request import Request
from rest_framework.views import APIView

from accounts.actions import journal_request
from accounts.auth import HasServiceToken, TokenActor
from config.api.requests import TOKEN_QUERY


class PublicApiView(APIView):
    """An endpoint anyone may read; no token is looked at."""

    authentication_classes: Sequence[type[BaseAuthentication]] = []
    permission_classes = [AllowAny]


class TokenApiView(APIView):
    """A token-gated endpoint. The action a write calls journals it with its actor and outcome, failures
    included; its entry records the request's query and body and the status answered."""

    permission_classes = [HasServiceToken]

    def actor_name(self) -> str:
        user = self.request.user
        if not isinstance(user, TokenActor):  # HasServiceToken let in only a token's actor
            raise NotAuthenticated()
        return user.name

    def dispatch(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        if request.method in SAFE_METHODS:
            return super().dispatch(request, *args, **kwargs)
        with journal_request(lambda: self.audit_params(self.request)) as journal:
            response = super().dispatch(request, *args, **kwargs)
            journal.answered(response.status_code)
        return response

    def audit_params(self, request: Request) -> dict[str, Any]:
        """What the journal records of a write: its query and JSON body."""
        params: dict[str, Any] = {k: v for k, v in request.query_params.items() if k != TOKEN_QUERY}
        try:
            if isinstance(request.data, dict):
                params.update(request.data)
        except APIException:  # unparseable or unsupported body: note it, the view has answered
            params["body"] = "unparseable"
        return params


class PublicReadApiView(TokenApiView):
    """Reads are public, writes need a token (and are journaled)."""

    def get_authenticators(self) -> list[BaseAuthentication]:
        # A read looks at no token, so a wrong one sent along neither fails nor counts towards the limit.
        if self.request is not None and self.request.method in SAFE_METHODS:
            return []
        return super().get_authenticators()

    def get_permissions(self) -> list[BasePermission]:
        if self.request is not None and self.request.method in SAFE_METHODS:
            return [AllowAny()]
        return [HasServiceToken()]
