from __future__ import annotations

import pytest
from django.urls import URLPattern, URLResolver, get_resolver
from openapi_spec_validator import validate

pytestmark = pytest.mark.django_db

SPEC_ENDPOINTS_SO_FAR = {
    ("GET", "/api"),
    ("GET", "/api/openapi.json"),
    ("GET", "/api/docs"),
    ("GET", "/healthz"),
    ("GET", "/api/health"),
    ("GET", "/api/logs"),
    ("GET", "/api/config"),
    ("PUT", "/api/config"),
    ("GET", "/api/jobs"),
    ("GET", "/api/jobs/{uuid}"),
    ("GET", "/api/audit"),
    ("POST", "/api/maintenance/reindex"),
    ("POST", "/api/maintenance/analyze"),
    ("GET", "/api/corpora"),
    ("POST", "/api/corpora"),
    ("GET", "/api/corpora/{name}"),
    ("DELETE", "/api/corpora/{name}"),
    ("POST", "/api/corpora/{name}/extend"),
    ("POST", "/api/corpora/{corpus}/services/{service}"),
    ("DELETE", "/api/corpora/{corpus}/services/{service}"),
    ("GET", "/api/services"),
    ("POST", "/api/services"),
    ("DELETE", "/api/services/{service}"),
    ("PUT", "/api/services/{service}/lease"),
    ("GET", "/api/services/{service}/workers"),
    ("POST", "/api/reports/{corpus}/{service}/pause"),
    ("POST", "/api/reports/{corpus}/{service}/resume"),
    ("POST", "/api/conversions/pause"),
    ("POST", "/api/conversions/resume"),
    ("POST", "/convert"),
    ("GET", "/api/reports/{corpus}/{service}"),
    ("GET", "/api/reports/{corpus}/{service}/{severity}"),
    ("GET", "/api/reports/{corpus}/{service}/{severity}/{category}"),
    ("GET", "/api/reports/{corpus}/{service}/{severity}/{category}/{what}"),
    ("GET", "/api/corpus/{corpus}/{service}/document/{name}"),
    ("POST", "/api/reports/{corpus}/{service}/rerun"),
    ("POST", "/api/reports/refresh"),
    ("POST", "/api/reports/{corpus}/{service}/refresh"),
    ("GET", "/api/services/{service}/runtimes"),
    ("GET", "/api/runs"),
    ("GET", "/api/runs/{corpus}/{service}"),
    ("GET", "/api/runs/{corpus}/{service}/current"),
    ("GET", "/api/runs/{corpus}/{service}/diff"),
    ("GET", "/api/runs/{corpus}/{service}/tasks"),
    ("POST", "/api/corpora/{corpus}/services/{service}/snapshot"),
    ("GET", "/api/compare/{corpus}/{service_a}/{service_b}"),
    ("GET", "/api/compare/{corpus}/{service_a}/{service_b}/tasks"),
    # sandbox corpora
    ("POST", "/api/corpora/{parent}/sandbox"),
    # --- status and statistics ---
    ("GET", "/api/status"),
    ("GET", "/api/statistics"),
    # --- sessions ---
    ("GET", "/api/sessions"),
    ("DELETE", "/api/sessions/{id}"),
    # --- passkeys ---
    ("GET", "/api/passkeys"),
    ("PATCH", "/api/passkeys/{id}"),
    ("DELETE", "/api/passkeys/{id}"),
}


@pytest.fixture
def document(api) -> dict:
    response = api.get("/api/openapi.json")
    assert response.status_code == 200
    return response.json()


def test_the_document_is_valid_openapi_3_0_with_version_0_6_0(document):
    validate(document)
    assert document["openapi"].startswith("3.0.")
    assert document["info"]["version"] == "0.6.0"


def test_the_service_token_scheme_covers_header_and_query(document):
    schemes = document["components"]["securitySchemes"]
    assert schemes["ServiceToken"] == {
        "type": "apiKey", "in": "header", "name": "X-Service-Token",
        "description": schemes["ServiceToken"]["description"],
    }  # fmt: skip
    assert schemes["ServiceTokenQuery"]["in"] == "query" and schemes["ServiceTokenQuery"]["name"] == "token"
    jobs = document["paths"]["/api/jobs"]["get"]
    assert jobs["security"] == [{"ServiceToken": []}, {"ServiceTokenQuery": []}]


def test_errors_are_documented_as_problem_json(document):
    responses = document["paths"]["/api/jobs/{uuid}"]["get"]["responses"]
    for code in ("401", "404"):
        assert responses[code]["content"] == {
            "application/problem+json": {"schema": {"$ref": "#/components/schemas/Problem"}}
        }


def _api_routes() -> set[str]:
    """Every concrete route under /api and /healthz, in OpenAPI's {param} form."""
    import re

    found: set[str] = set()

    def walk(patterns, prefix: str) -> None:
        for pattern in patterns:
            if isinstance(pattern, URLResolver):
                walk(pattern.url_patterns, prefix + str(pattern.pattern))
            elif isinstance(pattern, URLPattern) and not str(pattern.pattern).startswith("^"):
                route = "/" + prefix + str(pattern.pattern)
                found.add(re.sub(r"<(?:\w+:)?(\w+)>", r"{\1}", route).rstrip("/") or "/")

    walk(get_resolver().url_patterns, "")
    return {route for route in found if route.startswith(("/api", "/healthz", "/convert"))}


def test_every_api_route_is_in_the_document_and_the_discovery_index(api, document):
    routes = _api_routes()
    assert routes <= set(document["paths"]), routes - set(document["paths"])
    index = api.get("/api").json()
    listed = {(row["method"], row["path"]) for row in index["endpoints"]}
    documented = {
        (method.upper(), path) for path, item in document["paths"].items() for method in item if method != "parameters"
    }
    assert listed == documented
    assert listed >= SPEC_ENDPOINTS_SO_FAR


def test_the_discovery_index_says_which_endpoints_are_public(api):
    rows = {(row["method"], row["path"]): row for row in api.get("/api").json()["endpoints"]}
    assert rows[("GET", "/healthz")]["public"] is True
    assert rows[("GET", "/api")]["public"] is True
    assert rows[("GET", "/api/jobs")]["public"] is False
    assert rows[("GET", "/api/status")]["public"] is rows[("GET", "/api/statistics")]["public"] is True
    assert all(row["summary"] for row in rows.values())


def test_the_interactive_docs_load_their_assets_from_this_server(client):
    page = client.get("/api/docs")
    assert page.status_code == 200
    html = page.content.decode()
    import re

    # Every URL the page loads is of this server (a random CSRF token may spell "cdn": look at URLs only).
    urls = re.findall(r'(?:src|href|url)\s*[=:(]\s*["\']([^"\']+)["\']', html)
    assert urls and not [url for url in urls if "://" in url or url.startswith("//")], urls
    assets = re.findall(r'(?:src|href)="(/static/[^"]+)"', html)
    assert any("swagger-ui" in asset for asset in assets)
    for asset in assets:
        assert client.get(asset).status_code == 200, asset


def test_the_worker_record_documents_its_heartbeat_fields_and_every_kill_reason(document):
    from conversion.choices import KillReason

    schemas = document["components"]["schemas"]
    ok = document["paths"]["/api/services/{service}/workers"]["get"]["responses"]["200"]
    worker = schemas[ok["content"]["application/json"]["schema"]["items"]["$ref"].rsplit("/", 1)[1]]
    properties = worker["properties"]
    assert {"conversions", "peak_rss_bytes", "kills", "heartbeat_at"} <= set(properties) <= set(worker["required"])
    assert properties["heartbeat_at"]["nullable"] is True and properties["heartbeat_at"]["format"] == "date-time"
    assert properties["peak_rss_bytes"]["type"] == properties["conversions"]["type"] == "integer"
    kills = schemas[properties["kills"]["allOf"][0]["$ref"].rsplit("/", 1)[1]]
    assert list(kills["properties"]) == list(KillReason) and sorted(kills["required"]) == sorted(KillReason)
    assert all(field["type"] == "integer" for field in kills["properties"].values())
