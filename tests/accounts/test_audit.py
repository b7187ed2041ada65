from __future__ import annotations

import pytest

from accounts.models import AuditEntry

pytestmark = pytest.mark.django_db


def test_an_authenticated_write_is_journaled_with_actor_target_and_request_id(authed):
    response = authed.post("/api/maintenance/analyze", HTTP_X_REQUEST_ID="req-123")
    assert response.status_code == 202
    entry = AuditEntry.objects.get(action="maintenance_analyze")
    assert entry.actor == "tester"
    assert entry.outcome == "ok" and entry.status_code == 202
    assert entry.request_id == "req-123"
    assert response["X-Request-ID"] == "req-123"


def test_the_token_in_a_query_string_is_never_journaled(api, token):
    api.post(f"/api/maintenance/analyze?token={token}&note=hi")
    entry = AuditEntry.objects.get(action="maintenance_analyze")
    assert token not in str(entry.params)
    assert entry.params == {"note": "hi"}


def test_an_unauthenticated_write_is_refused_and_not_attributed(api):
    response = api.post("/api/maintenance/analyze")
    assert response.status_code == 401
    assert not AuditEntry.objects.filter(action="maintenance_analyze").exists()


def test_the_journal_lists_newest_first_and_filters(authed):
    authed.post("/api/maintenance/analyze")
    authed.post("/api/maintenance/reindex")
    rows = authed.get("/api/audit").json()
    actions = [row["action"] for row in rows]
    assert actions.index("maintenance_reindex") < actions.index("maintenance_analyze")
    only = authed.get("/api/audit", {"action": "maintenance_analyze"}).json()
    assert {row["action"] for row in only} == {"maintenance_analyze"}


def test_the_journal_is_token_gated(api):
    assert api.get("/api/audit").status_code == 401


def test_the_journal_screen_shows_the_same_entries_as_the_api(authed, screen_client):
    authed.post("/api/maintenance/analyze")
    api_rows = authed.get("/api/audit").json()
    screen = screen_client.get("/audit")
    assert screen.status_code == 200
    assert list(screen.context["entries"]) == api_rows


def test_a_revoked_token_ends_the_screen_session(screen_client, token):
    from django.core.management import call_command

    assert screen_client.get("/jobs").status_code == 200
    call_command("revoke_token", "--prefix", token[:12])
    response = screen_client.get("/jobs")
    assert response.status_code == 302 and response["Location"].startswith("/login")


def test_screens_refuse_a_wrong_token_at_sign_in(client, db):
    response = client.post("/login", {"token": "ccs_nope"})
    assert response.status_code == 401
    assert b"not valid" in response.content
