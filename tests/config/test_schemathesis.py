"""Property-based run over the whole OpenAPI document: no 5xx, every response matches its schema.

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
