"""Input no view can handle gets a clean answer, never a 500 or an HTML page on the API: NUL characters
anywhere in the request, absurdly nested JSON, bodies above the size limit, a POST to an unknown API
path without a CSRF cookie, a Host the server does not answer for."""

from __future__ import annotations

import json
import re
from urllib.parse import urlencode

import pytest
from django.core.exceptions import RequestDataTooBig
from django.test import Client
from django.urls import URLResolver, get_resolver
from rest_framework.test import APIClient

from config.api.errors import problem_exception_handler
from config.api.parsers import JSON_MAX_DEPTH, json_depth_exceeds
from services.models import Service

pytestmark = pytest.mark.django_db

PROBLEM = "application/problem+json"


def _assert_problem(response, status: int) -> dict:
    assert response.status_code == status, response.content[:300]
    assert response["Content-Type"] == PROBLEM
    body = response.json()
    assert body["status"] == status and {"type", "title", "detail"} <= body.keys()
    return body


def _url_patterns(patterns=None, prefix: str = "") -> list[str]:
    """Every route of the project (API and screens), as written in the URLconf."""
    routes = []
    for pattern in get_resolver().url_patterns if patterns is None else patterns:
        if isinstance(pattern, URLResolver):
            routes += _url_patterns(pattern.url_patterns, prefix + str(pattern.pattern))
        else:
            routes.append(prefix + str(pattern.pattern))
    return routes


ROUTES = _url_patterns()
# Every query parameter some view reads, each carrying a NUL.
NUL_QUERY = "&".join(
    f"{name}=a%00b"
    for name in ("token", "limit", "active", "offset", "page_size", "actor", "action", "confirm", "next",
                 "severity", "category", "what", "description", "fragment")
)  # fmt: skip


def _concrete(route: str, value: str) -> str:
    """The route with each parameter replaced by `value` (the catch-all regex gets a path of its own)."""
    if route.startswith("^"):
        return f"/api/{value}"
    return "/" + re.sub(r"<(?:\w+:)?\w+>", value, route)


@pytest.fixture
def lenient(token: str) -> APIClient:
    """A client with a token that returns a 500 instead of raising it, so a crash is seen as one."""
    client = APIClient(raise_request_exception=False)
    client.credentials(HTTP_X_SERVICE_TOKEN=token)
    return client


def test_the_routes_are_all_found():
    assert len(ROUTES) > 50 and "api/corpora/<str:name>" in ROUTES and "corpora/<str:name>" in ROUTES


@pytest.mark.parametrize("method", ["get", "post"])
@pytest.mark.parametrize("route", ROUTES)
def test_a_nul_in_a_path_segment_is_a_400_problem(lenient, route, method):
    path = _concrete(route, "x%00y") if "<" in route or route.startswith("^") else f"/{route}x%00y"
    body = _assert_problem(getattr(lenient, method)(path), 400)
    assert "NUL" in body["detail"]


@pytest.mark.parametrize("method", ["get", "post"])
@pytest.mark.parametrize("route", ROUTES)
def test_a_nul_in_a_query_parameter_is_a_400_problem(lenient, route, method):
    response = getattr(lenient, method)(f"{_concrete(route, 'x')}?{NUL_QUERY}")
    _assert_problem(response, 400)


def test_a_nul_in_a_token_header_or_a_form_field_is_a_400_problem(api, client):
    api.raise_request_exception = client.raise_request_exception = False
    _assert_problem(api.get("/api/jobs", HTTP_X_SERVICE_TOKEN="ccs_\x00abc"), 400)
    form = urlencode({"token": "ccs_x", "next": "/corpora\x00"})
    _assert_problem(client.post("/login", form, content_type="application/x-www-form-urlencoded"), 400)
    _assert_problem(api.post("/convert", {"tex": "a\x00b"}, format="multipart"), 400)  # the serializer's refusal


def test_json_nested_a_thousand_levels_deep_is_a_400_problem(authed):
    deep = "[" * 1000 + "]" * 1000
    body = _assert_problem(authed.post("/api/services", data=deep, content_type="application/json"), 400)
    assert "nested" in body["detail"]


def test_json_nested_below_the_recursion_limit_but_beyond_the_bound_is_a_400_problem(authed):
    deep = {"name": "deep", "description": "x"}
    for _ in range(JSON_MAX_DEPTH + 5):
        deep = {"child": deep}
    body = {"name": "deep", "extra": deep}
    response = authed.post("/api/services", data=json.dumps(body), content_type="application/json")
    _assert_problem(response, 400)
    assert not Service.objects.filter(name="deep").exists()


def test_the_depth_check_counts_containers_only():
    assert not json_depth_exceeds({"a": [1, {"b": "c"}]}, 3)
    assert json_depth_exceeds({"a": [1, {"b": ["c"]}]}, 3)
    assert not json_depth_exceeds("just a string", 0)


def test_a_convert_body_above_the_limit_is_a_413_problem(api, settings):
    api.raise_request_exception = False
    size = settings.DATA_UPLOAD_MAX_MEMORY_SIZE + 1000
    body = "tex=" + "a" * size
    response = api.post("/convert", data=body, content_type="application/x-www-form-urlencoded")
    assert "2621440" in _assert_problem(response, 413)["detail"]


def test_a_twenty_megabyte_json_body_is_a_413_problem(authed):
    authed.raise_request_exception = False
    body = json.dumps({"name": "big", "description": "x" * 20_000_000})
    _assert_problem(authed.post("/api/services", data=body, content_type="application/json"), 413)
    assert not Service.objects.filter(name="big").exists()


def test_a_body_django_refuses_inside_a_view_is_a_413_problem_too():
    response = problem_exception_handler(RequestDataTooBig("too big"), {"view": None})
    assert response.status_code == 413 and response.data["status"] == 413


def test_a_screen_form_above_the_limit_is_refused_before_it_is_read(client, settings):
    client.raise_request_exception = False
    body = "token=" + "a" * (settings.DATA_UPLOAD_MAX_MEMORY_SIZE + 1)
    _assert_problem(client.post("/login", data=body, content_type="application/x-www-form-urlencoded"), 413)


def test_a_post_to_an_unknown_api_path_without_csrf_cookie_is_the_404_problem(token):
    strict = APIClient(enforce_csrf_checks=True)
    response = strict.post("/api/no/such/thing", {"a": 1}, format="json", HTTP_X_SERVICE_TOKEN=token)
    assert "/api/no/such/thing" in _assert_problem(response, 404)["detail"]


def test_a_screen_form_without_csrf_cookie_is_still_refused_with_the_csrf_page(screen_client):
    strict = Client(enforce_csrf_checks=True)
    strict.cookies = screen_client.cookies
    response = strict.post("/corpora/new", {"name": "x", "path": "y"})
    assert response.status_code == 403 and response["Content-Type"].startswith("text/html")


@pytest.mark.parametrize("path", ["/api/jobs", "/api/nope", "/convert", "/healthz", "/api"])
def test_a_host_not_allowed_is_a_400_problem_on_machine_paths(api, path):
    api.raise_request_exception = False
    body = _assert_problem(api.get(path, HTTP_HOST="evil.example"), 400)
    assert "Host" in body["detail"]


def test_a_host_not_allowed_is_the_plain_400_page_on_screens(client):
    client.raise_request_exception = False
    response = client.get("/corpora", HTTP_HOST="evil.example")
    assert response.status_code == 400 and response["Content-Type"].startswith("text/html")
