"""One error body for every endpoint: RFC 9457 application/problem+json, never a traceback."""

from __future__ import annotations

import logging
import math
import re
from typing import Any

from django.conf import settings
from django.core.exceptions import DisallowedHost, PermissionDenied, RequestDataTooBig, SuspiciousOperation
from django.db import OperationalError
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.views.csrf import csrf_failure as django_csrf_failure
from django.views.decorators.csrf import csrf_exempt
from django.views.defaults import bad_request, page_not_found, server_error
from psycopg_pool import PoolTimeout
from rest_framework import exceptions, status
from rest_framework.response import Response

from config.errors import ServiceError, TooManyRequests
from config.logs import request_id_var

PROBLEM_CONTENT_TYPE = "application/problem+json"
logger = logging.getLogger(__name__)

# Paths whose callers are programs: their errors are problem+json, never an HTML page.
_MACHINE_PATH = re.compile(r"^/(?:api|convert|healthz)(?:/|$)")

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


def speaks_problem(path: str) -> bool:
    """Whether errors on this path answer problem+json (the API, /convert, /healthz) or a screen page."""
    return bool(_MACHINE_PATH.match(path))


def too_large_detail() -> str:
    """The words of every 413: the limit, in bytes."""
    return f"The request body is larger than {settings.DATA_UPLOAD_MAX_MEMORY_SIZE} bytes."


def problem_json_response(status_code: int, detail: str, **kwargs: Any) -> JsonResponse:
    """A plain Django response for code paths outside DRF (404 catch-all, handler500)."""
    return JsonResponse(
        problem_body(status_code, detail, **kwargs), status=status_code, content_type=PROBLEM_CONTENT_TYPE
    )


def _database_problem(exc: OperationalError) -> tuple[str, str]:
    cause = exc.__cause__ or exc
    if isinstance(cause, PoolTimeout) or "couldn't get a connection" in str(exc):
        return "The database connection pool is exhausted; retry shortly.", "pool-exhausted"
    return "The database is unavailable; retry shortly.", "database-unavailable"


def problem_exception_handler(exc: Exception, context: dict[str, Any]) -> Response:
    """DRF exception handler: every exception, expected or not, becomes a problem body."""
    headers: dict[str, str] = {}
    errors: object = None
    slug = None
    title = None
    if isinstance(exc, ServiceError):
        code, detail, errors, slug, title = exc.status, exc.detail, exc.errors, exc.slug, exc.title
        if isinstance(exc, TooManyRequests):
            headers["Retry-After"] = str(exc.retry_after)
    elif isinstance(exc, exceptions.ValidationError):
        code, detail, errors = 400, "The request has invalid fields.", exc.detail
    elif isinstance(exc, exceptions.APIException):
        code, detail = exc.status_code, str(exc.detail)
        if isinstance(exc, exceptions.NotAuthenticated | exceptions.AuthenticationFailed):
            headers["WWW-Authenticate"] = 'ServiceToken realm="api"'
            code = status.HTTP_401_UNAUTHORIZED
        # Throttled sets `wait` in its __init__, which djangorestframework-stubs 3.18.1 does not declare.
        wait: float | None = exc.wait if isinstance(exc, exceptions.Throttled) else None  # type: ignore[attr-defined]
        if wait is not None:
            headers["Retry-After"] = str(math.ceil(wait))
    elif isinstance(exc, RequestDataTooBig):  # a body Django refused to read while the view parsed it
        code, detail = 413, too_large_detail()
    elif isinstance(exc, SuspiciousOperation):  # e.g. too many form fields: the caller's fault, not ours
        code, detail = 400, str(exc) or "The request was refused."
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


@csrf_exempt  # an unknown path answers 404 whatever the method; a CSRF page would hide that
def api_not_found(request: HttpRequest, unmatched: str = "") -> JsonResponse:
    """Catch-all for unknown /api/... paths so they answer problem+json, not an HTML page."""
    return problem_json_response(404, f"No endpoint at {request.path}; GET /api lists them all.")


def handler400(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    """A request Django refused before any view (a Host not allowed, a body too big): problem+json on
    machine paths, Django's short page on screens."""
    if isinstance(exception, RequestDataTooBig):
        if speaks_problem(request.path):
            return problem_json_response(413, too_large_detail())
        return HttpResponse(too_large_detail(), status=413, content_type="text/plain; charset=utf-8")
    if speaks_problem(request.path):
        if isinstance(exception, DisallowedHost):
            detail = "The Host header names a host this server does not answer for (see ALLOWED_HOSTS)."
        else:
            detail = str(exception) or "The request was refused."
        return problem_json_response(400, detail)
    return bad_request(request, exception or SuspiciousOperation())  # Django's page shows no exception


def csrf_failure(request: HttpRequest, reason: str = "") -> HttpResponse:
    """CSRF_FAILURE_VIEW: the API uses tokens, not cookies, so a CSRF refusal there is a 403 problem."""
    if speaks_problem(request.path):
        return problem_json_response(403, f"CSRF verification failed: {reason}")
    return django_csrf_failure(request, reason)


def handler404(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    if speaks_problem(request.path):
        return problem_json_response(404, f"Nothing at {request.path}.")
    return page_not_found(request, exception)


def handler500(request: HttpRequest) -> HttpResponse:
    if speaks_problem(request.path):
        return problem_json_response(
            500, f"An internal error occurred; quote request id {request_id_var.get()} when reporting it."
        )
    return server_error(request)
