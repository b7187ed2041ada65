"""Service-token authentication for the API: header X-Service-Token or query parameter `token`, checked
behind the failure limit (accounts.lockout)."""

from __future__ import annotations

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework.authentication import BaseAuthentication
from rest_framework.exceptions import NotAuthenticated
from rest_framework.permissions import BasePermission
from rest_framework.request import Request

from accounts.actions import token_touch
from accounts.lockout import token_check
from accounts.models import ApiToken
from config.api.requests import TOKEN_HEADER, TOKEN_QUERY, client_address, raw_token


class TokenActor:
    """The authenticated caller of a gated endpoint: an actor name backed by a token."""

    is_authenticated = True

    def __init__(self, token: ApiToken) -> None:
        self.token = token
        self.name = token.actor

    def __str__(self) -> str:
        return self.name


class ServiceTokenAuthentication(BaseAuthentication):
    """Resolve the caller's token; a wrong token is reported by the permission, as a 401, and counts
    towards the failure limit of the caller's address (429 beyond it)."""

    def authenticate(self, request: Request) -> tuple[TokenActor, ApiToken] | None:
        raw = raw_token(request)
        token = token_check(raw, client_address(request)) if raw else None
        if token is None:
            return None
        token_touch(token)
        return TokenActor(token), token

    def authenticate_header(self, request: Request) -> str:
        return 'ServiceToken realm="api"'


class HasServiceToken(BasePermission):
    """Gate: the request must carry a valid, unrevoked service token."""

    def has_permission(self, request: Request, view: object) -> bool:
        if isinstance(request.user, TokenActor):
            return True
        if raw_token(request):
            raise NotAuthenticated("The service token is not valid or has been revoked.")
        raise NotAuthenticated(
            f"A service token is required: send it as header {TOKEN_HEADER} or query parameter {TOKEN_QUERY}."
        )


class ServiceTokenScheme(OpenApiAuthenticationExtension):
    """One token, two places to put it; either satisfies the gate."""

    target_class = "accounts.auth.ServiceTokenAuthentication"
    name = ["ServiceToken", "ServiceTokenQuery"]

    def get_security_requirement(self, auto_schema: object) -> list[dict[str, list[str]]]:
        # The header and the query form are alternatives, not both required.
        return [{"ServiceToken": []}, {"ServiceTokenQuery": []}]

    def get_security_definition(self, auto_schema: object) -> list[dict[str, str]]:
        return [
            {
                "type": "apiKey",
                "in": "header",
                "name": TOKEN_HEADER,
                "description": f"Service token in the {TOKEN_HEADER} header.",
            },
            {
                "type": "apiKey",
                "in": "query",
                "name": TOKEN_QUERY,
                "description": "The same service token as the query parameter `token`.",
            },
        ]
