"""Request-wide plumbing: every request gets an id that ties log lines and journal entries, and input
that no view could handle is refused before any of them sees it."""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from django.conf import settings
from django.http import HttpRequest, HttpResponse

from config.api.errors import problem_json_response, speaks_problem, too_large_detail
from config.api.requests import TOKEN_QUERY
from config.logs import request_id_var

_SAFE_ID = re.compile(r"^[A-Za-z0-9._-]{1,64}$")


class RequestIdMiddleware:
    """Adopt a sane incoming X-Request-ID or make one; echo it on the response."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        incoming = request.headers.get("X-Request-ID", "")
        request_id = incoming if _SAFE_ID.match(incoming) else uuid.uuid4().hex
        token = request_id_var.set(request_id)
        try:
            response = self.get_response(request)
        finally:
            request_id_var.reset(token)
        response["X-Request-ID"] = request_id
        return response


def url_without_token(url: str) -> str:
    """The URL with every `token` query parameter removed, also inside a `next` parameter it carries."""
    parts = urlsplit(url)
    if TOKEN_QUERY not in parts.query:
        return url
    pairs = [
        (key, url_without_token(value) if key == "next" else value)
        for key, value in parse_qsl(parts.query, keep_blank_values=True)
        if key != TOKEN_QUERY
    ]
    return urlunsplit(parts._replace(query=urlencode(pairs, safe="/")))


def _has_nul(request: HttpRequest) -> bool:
    query = request.META.get("QUERY_STRING", "")  # still percent-encoded; the path is decoded already
    if "\x00" in request.path_info or "%00" in query or "\x00" in query:
        return True
    headers = (value for key, value in request.META.items() if key.startswith("HTTP_"))
    return any(isinstance(value, str) and "\x00" in value for value in headers)


class RequestGuardMiddleware:
    """Refuse what no view can handle before anything reads the request: a NUL character in the path,
    the query, a header or a URL-encoded form (PostgreSQL text cannot hold one) answers 400, a body
    above DATA_UPLOAD_MAX_MEMORY_SIZE (REQUEST_MAX_BYTES) answers 413, both as problem+json on every
    path. On the way out, a redirect never carries a service token (it would end up in the next page,
    the browser's history and the logs)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        refusal = self._refusal(request)
        if refusal is not None:
            return refusal
        response = self.get_response(request)
        location = response.get("Location")
        if location and TOKEN_QUERY in location:
            response["Location"] = url_without_token(location)
        return response

    def _refusal(self, request: HttpRequest) -> HttpResponse | None:
        if _has_nul(request):
            return problem_json_response(
                400, "The request holds a NUL character, which no name or parameter may contain."
            )
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        try:
            length = int(request.META.get("CONTENT_LENGTH") or 0)
        except ValueError:
            return problem_json_response(400, "The Content-Length header is not a number.")
        if limit is not None and length > limit:
            return problem_json_response(413, too_large_detail())
        is_form = request.META.get("CONTENT_TYPE", "").startswith("application/x-www-form-urlencoded")
        if length and is_form and (b"%00" in request.body or b"\x00" in request.body):  # read once, kept
            return problem_json_response(400, "The form holds a NUL character, which no field may contain.")
        return None


# The screens load only our own static files (htmx is vendored under static/): no inline script, style
# or event attribute, nothing from another origin. Bars are SVG sized by attributes for this reason.
SCREEN_CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; font-src 'self'; "
    "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'self'"
)


class ScreenSecurityPolicyMiddleware:
    """Give every HTML page of the screens SCREEN_CSP, unless its view set a policy of its own (a converted
    paper's files have a stricter one). The API's pages (/api/docs) are left as they are."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        is_html = response.get("Content-Type", "").startswith("text/html")
        if is_html and not speaks_problem(request.path) and "Content-Security-Policy" not in response:
            response["Content-Security-Policy"] = SCREEN_CSP
        return response
