from __future__ import annotations

import pytest

from accounts.models import AuditEntry

pytestmark = pytest.mark.django_db

PROBLEM = "application/problem+json"


def _assert_problem(response, status: int) -> dict:
    assert response.status_code == status
    assert response["Content-Type"] == PROBLEM
    body = response.json()
    assert body["status"] == status
    assert {"type", "title", "detail"} <= body.keys()
    return body


def test_unknown_api_paths_answer_a_problem_not_html(api):
    for path in ("/api/nope", "/api/jobs/x/y/z", "/api/corpora-typo"):
        body = _assert_problem(api.get(path), 404)
        assert path in body["detail"]


def test_wrong_method_is_a_405_problem(authed):
    _assert_problem(authed.delete("/api/jobs"), 405)


@pytest.mark.urls("tests.config.faults_urls")
def test_malformed_json_is_a_400_problem(authed):
    response = authed.post("/api/_test/echo", data="{not json", content_type="application/json")
    _assert_problem(response, 400)


@pytest.mark.urls("tests.config.faults_urls")
def test_a_body_of_an_unsupported_type_is_a_415_problem(authed):
    response = authed.post("/api/_test/echo", data="a=1", content_type="application/x-www-form-urlencoded")
    _assert_problem(response, 415)


def test_invalid_query_parameters_are_a_400_problem_with_field_errors(authed):
    body = _assert_problem(authed.get("/api/jobs", {"limit": "many"}), 400)
    assert "limit" in body["errors"]


@pytest.mark.urls("tests.config.faults_urls")
def test_a_crash_is_a_500_problem_without_traceback_or_secrets(api):
    body = _assert_problem(api.get("/api/_test/crash"), 500)
    text = str(body)
    assert "Traceback" not in text and "hunter2" not in text and "RuntimeError" not in text
    assert body["request_id"] in body["detail"]


@pytest.mark.urls("tests.config.faults_urls")
def test_a_failed_write_is_journaled_with_its_outcome(authed):
    body = _assert_problem(authed.post("/api/_test/write/alpha"), 409)
    assert body["detail"] == "alpha exists already"
    entry = AuditEntry.objects.get(action="test.failing_write")
    assert entry.status_code == 409 and entry.outcome.startswith("409") and entry.target == "alpha"


def test_every_response_carries_a_request_id(api):
    response = api.get("/api/nope")
    assert response["X-Request-ID"] == response.json()["request_id"]


def test_an_unsafe_request_id_header_is_replaced(api):
    response = api.get("/healthz", HTTP_X_REQUEST_ID="bad id\nwith newline")
    assert response["X-Request-ID"] != "bad id\nwith newline" and len(response["X-Request-ID"]) == 32
