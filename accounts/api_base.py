"""Base classes for the API: public views ignore tokens; gated views demand one and journal writes."""

from __future__ import annotations

import logging
from typing import Any

from django.db import transaction
from rest_framework.exceptions import APIException
from rest_framework.permissions import SAFE_METHODS, AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.actions import audit_record
from accounts.auth import HasServiceToken, TokenActor
from config.api.requests import TOKEN_QUERY

logger = logging.getLogger(__name__)


class PublicApiView(APIView):
    """An endpoint anyone may read; no token is looked at."""

    authentication_classes: list = []
    permission_classes = [AllowAny]


class TokenApiView(APIView):
    """A token-gated endpoint. Each write is journaled with its actor and outcome, failures included."""

    permission_classes = [HasServiceToken]
    # The journal's name of this view's writes (accounts.journal.Action), or one per HTTP method.
    audit_action: str = ""
    audit_actions: dict[str, str] = {}

    def actor_name(self) -> str:
        return self.request.user.name

    def audit_target(self, kwargs: dict[str, Any]) -> str:
        return "/".join(str(value) for value in kwargs.values())

    def body_field(self, name: str) -> str:
        """A field of the JSON body, or '' when there is none (or the body could not be parsed)."""
        try:
            data = self.request.data
        except APIException:
            return ""
        return str(data.get(name, ""))[:200] if isinstance(data, dict) else ""

    def finalize_response(self, request: Request, response: Response, *args: Any, **kwargs: Any) -> Response:
        response = super().finalize_response(request, response, *args, **kwargs)
        user = getattr(request, "_user", None)
        if request.method not in SAFE_METHODS and isinstance(user, TokenActor):
            self._journal(request, response, kwargs)
        return response

    def audit_params(self, request: Request, response: Response) -> dict[str, Any]:
        """What the journal records of a write: its query and JSON body (a view may record less)."""
        params: dict[str, Any] = {k: v for k, v in request.query_params.items() if k != TOKEN_QUERY}
        try:
            if isinstance(request.data, dict):
                params.update(request.data)
        except APIException:  # unparseable or unsupported body: note it, the view has answered
            params["body"] = "unparseable"
        return params

    def _journal(self, request: Request, response: Response, kwargs: dict[str, Any]) -> None:
        params = self.audit_params(request, response)
        code = response.status_code
        data = getattr(response, "data", None)
        try:
            with transaction.atomic():  # a savepoint: a journal failure cannot poison the request's work
                audit_record(
                    actor=request.user.name,
                    action=self.audit_actions.get(request.method, self.audit_action)
                    or f"{type(self).__name__}.{request.method}",
                    target=self.audit_target(kwargs),
                    params=params,
                    status_code=code,
                    title=str(data.get("title", "")) if isinstance(data, dict) else "",
                )
        except Exception:  # a journal failure must not turn a done write into an error
            logger.exception("could not journal %s %s", request.method, request.path)


class PublicReadApiView(TokenApiView):
    """Reads are public, writes need a token (and are journaled)."""

    def get_authenticators(self) -> list:
        # A read looks at no token, so a wrong one sent along neither fails nor counts towards the limit.
        if self.request is not None and self.request.method in SAFE_METHODS:
            return []
        return super().get_authenticators()

    def get_permissions(self) -> list:
        if self.request is not None and self.request.method in SAFE_METHODS:
            return [AllowAny()]
        return [HasServiceToken()]
