"""Property-based run over the whole OpenAPI document, every operation and method alone and then in
chains along the links schemathesis infers: no 5xx, every response matches its schema.

The schema is loaded once at import (building it touches no table); each generated case then runs
inside the test's transaction with a valid token, so gated endpoints are exercised for real.
"""

from __future__ import annotations

import pytest
import schemathesis
from django.core.signals import request_finished, request_started
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

schema = schemathesis.openapi.from_wsgi("/api/openapi.json", get_wsgi_application())


@pytest.fixture(autouse=True)
def keep_test_connection():
    """As Django's own test client does: keep the test's connection (and its transaction) open across
    requests instead of closing it when each one finishes."""
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


@pytest.mark.django_db
@schema.parametrize()
@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
def test_the_api_honours_its_openapi_document(case, token):
    case.call_and_validate(
        headers={"X-Service-Token": token},
        checks=[
            not_a_server_error,
            response_schema_conformance,
            content_type_conformance,
            status_code_conformance,
        ],
    )


CHECKS = [not_a_server_error, response_schema_conformance, content_type_conformance, status_code_conformance]


@pytest.mark.django_db
def test_the_api_honours_its_openapi_document_through_linked_calls(token):
    """Stateful: schemathesis chains operations by the links it infers (POST /api/corpora's job to
    GET /api/jobs/{uuid}, a created service to its detail, lease and delete, ...)."""

    class LinkedCalls(schema.as_state_machine()):
        def get_call_kwargs(self, case):
            return {"headers": {"X-Service-Token": token}}

        def validate_response(self, response, case, additional_checks=None, **kwargs):
            case.validate_response(response, checks=CHECKS, transport_kwargs=kwargs)

    LinkedCalls.run(
        settings=settings(
            max_examples=25, stateful_step_count=6, deadline=None, suppress_health_check=list(HealthCheck)
        )
    )
