"""A filter a screen cannot take is refused as its API twin refuses it: 400, with the API's words; an
empty form field is no filter at all, on every screen."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.django_db

TWINS = [
    ("/jobs", "/api/jobs", {"limit": "many"}),
    ("/jobs", "/api/jobs", {"active": "sometimes"}),
    ("/audit", "/api/audit", {"limit": "0"}),
    ("/audit", "/api/audit", {"actor": "x" * 101}),
    ("/runs", "/api/runs", {"limit": "0"}),
    ("/logs", "/api/logs", {"level": "LOUD"}),
    ("/statistics", "/api/statistics", {"corpus": "x" * 101}),
    ("/corpora/c/services/s/documents", "/api/corpora/c/services/s/documents", {"status": "done"}),
]


@pytest.mark.parametrize(("screen", "twin_path", "query"), TWINS)
def test_an_invalid_filter_is_a_400_on_the_screen_as_on_its_api_twin(screen_client, authed, screen, twin_path, query):
    twin = authed.get(twin_path, query)
    assert twin.status_code == 400
    page = screen_client.get(screen, query)
    assert page.status_code == 400
    assert twin.json()["detail"] in page.content.decode()


@pytest.mark.parametrize(
    ("screen", "query"),
    [("/jobs", {"limit": "", "active": ""}), ("/audit", {"actor": "", "action": "", "limit": ""})],
)
def test_an_empty_filter_field_narrows_nothing(screen_client, screen, query):
    assert screen_client.get(screen, query).status_code == 200
