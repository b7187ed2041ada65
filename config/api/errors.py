"""One error body for every endpoint: RFC 9457 application/problem+json, never a traceback."""

from __future__ import annotations

import logging
from typing import Any

from django.core.exceptions import PermissionDenied
from django.db import OperationalError
from django.http import Http404, HttpRequest, JsonResponse
from rest_framework import exceptions, status
from rest_framework.response import Response

from config.errors import ServiceError
from config.logs import request_id_var

PROBLEM_CONTENT_TYPE = "application/problem+json"
logger = logging.getLogger(__name__)

_TITLES = {
    400: ("Bad request", "bad-request"),
    401: ("Not authenticated", "not-authenticated"),
    403: ("Forbidden", "forbidden"),
    404: ("Not found", "not-found"),
    405: ("Method not allowed", "method-not-allowed"),
    406: ("Not acceptable", "not-acceptable"),
    409: ("Conflict", "conflict"),
    413: ("Payload too large", "payload-too-large"),
    415: ("Unsupported media type", "unsupported-media-type"),
    422: ("Unprocessable request", "unprocessable"),
    429: ("Too many requests", "too-many-requests"),
    500: ("Internal server error", "internal"),
    503: ("Service unavailable", "unavailable"),
}


def problem_body(
    status_code: int, detail: str, *, title: str | None = None, slug: str | None = None, errors: Any = None
) -> dict[str, Any]:
    """Build the RFC 9457 body; `errors` carries field problems when there are any."""
    default_title, default_slug = _TITLES.get(status_code, ("Error", "error"))
    body: dict[str, Any] = {
        "type": f"urn:ccs:problem:{slug or default_slug}",
        "title": title or default_title,
        "status": status_code,
        "detail": detail,
        "request_id": request_id_var.get(),
    }
    if errors:
        body["errors"] = errors
    return body


def problem_json_response(status_code: int, detail: str, **kwargs: Any) -> JsonResponse:
    """A plain Django response for code paths outside DRF (404 catch-all, handler500)."""
    return JsonResponse(
        problem_body(status_code, detail, **kwargs), status=status_code, content_type=PROBLEM_CONTENT_TYPE
    )


def _database_problem(exc: OperationalError) -> tuple[str, str]:
    from psycopg_pool import PoolTimeout

    cause = exc.__cause__ or exc
    if isinstance(cause, PoolTimeout) or "couldn't get a connection" in str(exc):
        return "The database connection pool is exhausted; retry shortly.", "pool-exhausted"
    return "The database is unavailable; retry shortly.", "database-unavailable"


def problem_exception_handler(exc: Exception, context: dict[str, Any]) -> Response:
    """DRF exception handler: every exception, expected or not, becomes a problem body."""
    headers: dict[str, str] = {}
    errors = None
    slug = None
    title = None
    if isinstance(exc, ServiceError):
        code, detail, errors, slug, title = exc.status, exc.detail, exc.errors, exc.slug, exc.title
    elif isinstance(exc, exceptions.ValidationError):
        code, detail, errors = 400, "The request has invalid fields.", exc.detail
    elif isinstance(exc, exceptions.APIException):
        code, detail = exc.status_code, str(exc.detail)
        if isinstance(exc, exceptions.NotAuthenticated | exceptions.AuthenticationFailed):
            headers["WWW-Authenticate"] = 'ServiceToken realm="api"'
            code = status.HTTP_401_UNAUTHORIZED
    elif isinstance(exc, Http404):
        code, detail = 404, str(exc) or "Not found."
    elif isinstance(exc, PermissionDenied):
        code, detail = 403, str(exc) or "Forbidden."
    elif isinstance(exc, OperationalError):
        logger.warning("database error: %s", exc)
        code = 503
        detail, slug = _database_problem(exc)
    else:
        logger.exception("unhandled error in %s", context.get("view").__class__.__name__)
        code = 500
        detail = f"An internal error occurred; quote request id {request_id_var.get()} when reporting it."
    body = problem_body(code, detail, errors=errors, slug=slug, title=title)
    return Response(body, status=code, headers=headers, content_type=PROBLEM_CONTENT_TYPE)


def api_not_found(request: HttpRequest, unmatched: str = "") -> JsonResponse:
    """Catch-all for unknown /api/... paths so they answer problem+json, not an HTML page."""
    return problem_json_response(404, f"No endpoint at {request.path}; GET /api lists them all.")


def handler404(request: HttpRequest, exception: Exception | None = None):  # noqa: ANN201
    from django.views.defaults import page_not_found

    if request.path.startswith("/api"):
        return problem_json_response(404, f"Nothing at {request.path}.")
    return page_not_found(request, exception)


def handler500(request: HttpRequest):  # noqa: ANN201
    from django.views.defaults import server_error

    if request.path.startswith("/api"):
        return problem_json_response(
            500, f"An internal error occurred; quote request id {request_id_var.get()} when reporting it."
        )
    return server_error(request)
