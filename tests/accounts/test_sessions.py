"""Signed-in screen sessions: recorded at sign-in, listed by the API, the screen and the command, revoked
by any of them (the browser's next request is signed out), journaled, the session key never shown."""

from __future__ import annotations

from datetime import timedelta
from io import StringIO

import pytest
from django.contrib.sessions.models import Session
from django.core.management import CommandError, call_command
from django.test import Client
from django.utils import timezone

from accounts import actions
from accounts.actions import token_create
from accounts.models import AuditEntry, ScreenSession

pytestmark = pytest.mark.django_db


def _sign_in(token: str, address: str = "127.0.0.1") -> Client:
    browser = Client(REMOTE_ADDR=address)
    response = browser.post("/login", {"token": token})
    assert response.status_code == 302, response.content
    return browser


def _key(browser: Client) -> str:
    return browser.cookies["sessionid"].value


def test_a_sign_in_appears_with_its_actor_address_and_times(authed):
    _, raw = token_create(actor="operator", created_by="pytest")
    before = timezone.now()
    _sign_in(raw, "10.1.2.3")
    rows = authed.get("/api/sessions").json()
    assert len(rows) == 1
    row = rows[0]
    assert row["actor"] == "operator" and row["client_address"] == "10.1.2.3"
    assert set(row) == {"id", "actor", "client_address", "started_at", "last_seen_at", "expires_at"}
    started = ScreenSession.objects.get(pk=row["id"]).started_at
    assert before <= started <= timezone.now()


def test_revoking_through_the_api_signs_the_browser_out_at_once(authed, token):
    browser = _sign_in(token)
    assert browser.get("/audit").status_code == 200
    key = _key(browser)
    (row,) = authed.get("/api/sessions").json()
    response = authed.delete(f"/api/sessions/{row['id']}")
    assert response.status_code == 204
    assert not Session.objects.filter(session_key=key).exists()
    after = browser.get("/audit")
    assert after.status_code == 302 and after["Location"].startswith("/login")
    assert authed.get("/api/sessions").json() == []
    entry = AuditEntry.objects.get(action="session.revoke")
    assert entry.actor == "tester" and entry.target == str(row["id"]) and entry.outcome == "ok"


def test_only_the_revoked_session_ends(authed, token):
    first, second = _sign_in(token), _sign_in(token)
    ids = {row["id"] for row in authed.get("/api/sessions").json()}
    assert len(ids) == 2
    first_id = ScreenSession.objects.get(session_key=_key(first)).pk
    assert authed.delete(f"/api/sessions/{first_id}").status_code == 204
    assert first.get("/audit").status_code == 302
    assert second.get("/audit").status_code == 200


def test_the_api_is_token_gated(api, token):
    _sign_in(token)
    session_id = ScreenSession.objects.get().pk
    assert api.get("/api/sessions").status_code == 401
    assert api.delete(f"/api/sessions/{session_id}").status_code == 401
    assert ScreenSession.objects.filter(pk=session_id).exists()


def test_an_unknown_or_ended_session_is_404_and_journaled_as_such(authed, token):
    response = authed.delete("/api/sessions/987654")
    assert response.status_code == 404 and response["Content-Type"] == "application/problem+json"
    browser = _sign_in(token)
    browser.post("/logout")
    ended = ScreenSession.objects.filter(session_key=_key(browser))
    assert not ended.exists()  # a sign-out removes its record
    assert authed.get("/api/sessions").json() == []
    entry = AuditEntry.objects.get(action="session.revoke")
    assert entry.status_code == 404 and entry.outcome.startswith("404")


def test_an_expired_session_is_not_listed_and_its_record_goes_at_the_next_sign_in(authed, token):
    browser = _sign_in(token)
    Session.objects.filter(session_key=_key(browser)).update(expire_date=timezone.now() - timedelta(seconds=1))
    assert authed.get("/api/sessions").json() == []
    _sign_in(token)
    assert ScreenSession.objects.count() == 1


def test_last_seen_moves_at_most_once_a_minute(token):
    browser = _sign_in(token)
    record = ScreenSession.objects.filter(session_key=_key(browser))
    old = timezone.now() - timedelta(minutes=5)
    record.update(last_seen_at=old)
    actions._touched.pop(_key(browser), None)  # as if this process had not written it for a minute
    browser.get("/audit")
    seen = record.get().last_seen_at
    assert seen > old + timedelta(minutes=4)
    record.update(last_seen_at=old)
    browser.get("/audit")  # within the minute: no write
    assert record.get().last_seen_at == old
    actions._touched.pop(_key(browser), None)
    record.update(last_seen_at=timezone.now() - timedelta(seconds=10))
    browser.get("/audit")  # another process wrote it 10 s ago: the update matches no row
    assert timezone.now() - record.get().last_seen_at >= timedelta(seconds=10)


def test_the_screen_lists_the_same_dto_as_the_api_and_revokes_with_a_journal_entry(authed, token):
    _, raw = token_create(actor="operator", created_by="pytest")
    other = _sign_in(raw, "10.9.8.7")
    screen = _sign_in(token)
    page = screen.get("/sessions")
    assert page.status_code == 200
    assert [dict(row) for row in page.context["sessions"]] == authed.get("/api/sessions").json()
    body = page.content.decode()
    assert "10.9.8.7" in body and "operator" in body and "(this one)" in body
    other_id = ScreenSession.objects.get(session_key=_key(other)).pk
    done = screen.post(f"/sessions/{other_id}/revoke")
    assert done.status_code == 302 and done["Location"] == "/sessions"
    assert other.get("/audit").status_code == 302
    entry = AuditEntry.objects.get(action="session.revoke")
    assert entry.actor == "tester" and entry.target == str(other_id) and entry.outcome == "ok"
    assert screen.post("/sessions/987654/revoke").status_code == 404
    assert screen.get(f"/sessions/{other_id}/revoke").status_code == 405


def test_the_screen_needs_a_signed_in_operator(client):
    response = client.get("/sessions")
    assert response.status_code == 302 and response["Location"].startswith("/login")


def test_the_command_lists_and_revokes(token):
    browser = _sign_in(token, "10.5.5.5")
    session_id = ScreenSession.objects.get().pk
    listing = StringIO()
    call_command("revoke_session", "--list", stdout=listing)
    assert f"{session_id}\ttester\t10.5.5.5" in listing.getvalue()
    out = StringIO()
    call_command("revoke_session", str(session_id), stdout=out)
    assert f"revoked session {session_id} of tester" in out.getvalue()
    assert browser.get("/audit").status_code == 302
    entry = AuditEntry.objects.get(action="session.revoke")
    assert entry.actor.startswith("cli") and entry.target == str(session_id)
    with pytest.raises(CommandError):
        call_command("revoke_session", str(session_id))


def test_no_session_key_is_ever_shown(authed, token):
    browser = _sign_in(token)
    key = _key(browser)
    session_id = ScreenSession.objects.get().pk
    listing = StringIO()
    call_command("revoke_session", "--list", stdout=listing)
    shown = [
        authed.get("/api/sessions").content.decode(),
        browser.get("/sessions").content.decode(),
        listing.getvalue(),
    ]
    assert authed.delete(f"/api/sessions/{session_id}").status_code == 204
    shown.append(authed.get("/api/audit").content.decode())
    shown.append(str(list(AuditEntry.objects.values())))
    for text in shown:
        assert key not in text and key[:12] not in text


def test_a_revocation_called_directly_is_journaled_as_from_the_api(token):
    from config.errors import NotFound

    with pytest.raises(NotFound):
        actions.screen_session_revoke(987654, actor="shell")
    entry = AuditEntry.objects.get(action="session.revoke")
    assert (entry.actor, entry.target, entry.status_code) == ("shell", "987654", 404)


def test_the_session_and_csrf_cookies_go_only_with_this_sites_own_requests(token):
    """SameSite=Lax: another site's page, or a converted paper (sandboxed, with no origin of this site),
    cannot make the browser send them with its requests; the session cookie is out of script's reach."""
    browser = Client()
    assert browser.get("/login").cookies["csrftoken"]["samesite"] == "Lax"
    session = browser.post("/login", {"token": token}).cookies["sessionid"]
    assert session["samesite"] == "Lax" and session["httponly"] is True
