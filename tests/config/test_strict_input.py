"""Types are what the OpenAPI document says: a string field takes only a string, and what the document
allows for a parameter the endpoint accepts (and the other way round)."""

from __future__ import annotations

import pytest

from corpora.models import Corpus
from services.models import Service
from wiring.discovery import openapi_document

pytestmark = pytest.mark.django_db


def _json_fields(kind: str) -> list[tuple[str, str, str]]:
    """(method, path, field) for every property of type `kind` of every JSON request body in the document."""
    document = openapi_document()
    schemas = document["components"]["schemas"]
    found = []
    for path, item in document["paths"].items():
        for method, operation in item.items():
            content = operation.get("requestBody", {}).get("content", {}).get("application/json")
            if not content:
                continue
            schema = content["schema"]
            if "$ref" in schema:
                schema = schemas[schema["$ref"].rsplit("/", 1)[1]]
            for name, prop in schema.get("properties", {}).items():
                if prop.get("type") == kind and not prop.get("readOnly"):
                    found.append((method, path, name))
    return found


STRING_FIELDS = _json_fields("string")
INTEGER_FIELDS = _json_fields("integer")


def test_the_document_has_json_bodies_with_string_fields():
    assert ("post", "/api/services", "name") in STRING_FIELDS and ("post", "/api/corpora", "path") in STRING_FIELDS


@pytest.mark.parametrize(("method", "path", "field"), STRING_FIELDS)
@pytest.mark.parametrize("value", [123, 1.5, True, ["x"], {"x": 1}])
def test_a_string_field_refuses_anything_but_a_string(authed, method, path, field, value):
    # An integer path parameter ({id}) names nothing: the body is checked before anything is looked up.
    response = getattr(authed, method)(path.replace("{id}", "987654"), {field: value}, format="json")
    assert response.status_code == 400, response.content
    assert response.json()["errors"][field] == ["Not a valid string."]


def test_the_document_has_json_bodies_with_integer_fields():
    assert ("post", "/api/services", "lease_seconds") in INTEGER_FIELDS
    assert ("put", "/api/services/{service}/lease", "seconds") in INTEGER_FIELDS


@pytest.mark.parametrize(("method", "path", "field"), INTEGER_FIELDS)
@pytest.mark.parametrize("value", ["5", 5.0, 5.5, True])
def test_an_integer_field_refuses_anything_but_an_integer(authed, method, path, field, value):
    assert authed.post("/api/services", {"name": "svc"}, format="json").status_code == 201
    response = getattr(authed, method)(path.replace("{service}", "svc"), {field: value}, format="json")
    assert response.status_code == 400, response.content
    assert field in response.json()["errors"]


def test_the_service_form_still_takes_its_lease_as_text(screen_client):
    response = screen_client.post("/services", {"name": "formsvc", "lease_seconds": "60"})
    assert response.status_code == 302 and Service.objects.get(name="formsvc").lease_seconds == 60


def test_a_service_named_by_a_number_is_refused(authed):
    response = authed.post("/api/services", {"name": 123}, format="json")
    assert response.status_code == 400 and response.json()["errors"]["name"] == ["Not a valid string."]
    assert not Service.objects.filter(name="123").exists()


def test_an_import_with_a_number_for_its_path_is_refused(authed, corpus_root):
    response = authed.post("/api/corpora", {"name": "c", "path": 7}, format="json")
    assert response.status_code == 400 and "path" in response.json()["errors"]
    assert not Corpus.objects.filter(name="c").exists()


def _parameter(path: str, method: str, name: str) -> dict:
    operation = openapi_document()["paths"][path][method]
    return next(p for p in operation["parameters"] if p["name"] == name and p["in"] == "query")


def test_an_empty_journal_filter_is_no_filter_and_the_document_allows_it(authed):
    assert "minLength" not in _parameter("/api/audit", "get", "actor")["schema"]
    authed.post("/api/services", {"name": "svc"}, format="json")
    everything = authed.get("/api/audit").json()
    assert everything and authed.get("/api/audit", {"actor": ""}).json() == everything
    assert authed.get("/api/audit", {"actor": "nobody"}).json() == []


@pytest.mark.parametrize(
    "path",
    [
        "/api/reports/{corpus}/{service}/{severity}",
        "/api/reports/{corpus}/{service}/{severity}/{category}",
        "/api/services/{service}/runtimes",
    ],
)
def test_the_document_states_the_page_bounds_the_reports_enforce(path):
    assert _parameter(path, "get", "page_size")["schema"]["minimum"] == 1
    assert _parameter(path, "get", "offset")["schema"]["minimum"] == 0


def test_a_page_size_of_zero_is_refused_as_the_document_says(authed):
    assert authed.post("/api/services", {"name": "svc"}, format="json").status_code == 201
    response = authed.get("/api/services/svc/runtimes", {"page_size": 0})
    assert response.status_code == 400 and "page_size" in response.json()["errors"]
    assert authed.get("/api/services/svc/runtimes", {"page_size": 1}).status_code == 200


def test_the_rerun_parameters_carry_the_serializers_limits():
    assert _parameter("/api/reports/{corpus}/{service}/rerun", "post", "category")["schema"]["maxLength"] == 100
    assert _parameter("/api/reports/{corpus}/{service}/rerun", "post", "what")["schema"]["maxLength"] == 200
