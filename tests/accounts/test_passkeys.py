"""Passkeys: registered from a signed-in screen session, used to sign in, listed, renamed and revoked by the
screen and the API alike, every step journaled. Challenges are single-use, expire and belong to the
session they were given to; a revoked passkey, or one of an actor without an active token, signs no one in
and ends the sessions it opened. The answers are real WebAuthn answers of a software authenticator
(tests/accounts/authenticator.py), checked by py_webauthn."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from accounts.actions import CHALLENGE_REFUSED, passkey_sign_in, token_create, token_revoke
from accounts.middleware import SESSION_PASSKEY_KEY, SESSION_TOKEN_KEY
from accounts.models import AuditEntry, Passkey, PasskeyChallenge, ScreenSession
from tests.accounts.authenticator import Authenticator

pytestmark = pytest.mark.django_db

RP_ID, ORIGIN = "localhost", "http://localhost:8000"


@pytest.fixture(autouse=True)
def relying_party(settings):
    settings.PASSKEY_RP_ID, settings.PASSKEY_ORIGINS = RP_ID, [ORIGIN]
    settings.PASSKEY_CHALLENGE_SECONDS = 120


def _signed_in(token: str) -> Client:
    browser = Client()
    assert browser.post("/login", {"token": token}).status_code == 302
    return browser


def _register(browser: Client, authenticator: Authenticator, name: str = "laptop"):
    options = browser.post("/passkeys/register/options").json()
    return browser.post(
        "/passkeys/register",
        {"name": name, "credential": authenticator.create(options)},
        content_type="application/json",
    )


def _registered(token: str, name: str = "laptop") -> tuple[Authenticator, Passkey]:
    authenticator = Authenticator(RP_ID, ORIGIN)
    response = _register(_signed_in(token), authenticator, name)
    assert response.status_code == 201, response.content
    return authenticator, Passkey.objects.get(pk=response.json()["id"])


def _sign_in(authenticator: Authenticator, browser: Client | None = None, **answer):
    browser = browser or Client()
    options = browser.post("/login/passkey/options").json()
    credential = authenticator.get(options, **answer)
    response = browser.post(
        "/login/passkey", {"credential": credential, "next": "/jobs"}, content_type="application/json"
    )
    return browser, response


def _entries(action: str) -> list[AuditEntry]:
    return list(AuditEntry.objects.filter(action=action).order_by("id"))


def test_register_then_sign_in_opens_a_session_tied_to_the_passkey(token):
    authenticator, passkey = _registered(token)
    assert (passkey.actor, passkey.name, passkey.transports) == ("tester", "laptop", ["internal"])
    assert passkey.credential_id == authenticator.id and passkey.revoked_at is None
    (entry,) = _entries("passkey.register")
    assert (entry.actor, entry.target, entry.outcome) == ("tester", "laptop", "ok")
    assert entry.params == {"passkey": passkey.pk, "name": "laptop"}

    browser, response = _sign_in(authenticator)
    assert response.status_code == 200 and response.json() == {"redirect": "/jobs"}
    assert browser.get("/audit").status_code == 200
    assert browser.session[SESSION_PASSKEY_KEY] == passkey.pk and SESSION_TOKEN_KEY not in browser.session
    session = ScreenSession.objects.get(session_key=browser.session.session_key)
    assert session.actor == "tester"
    passkey.refresh_from_db()
    assert passkey.sign_count == 1 and passkey.last_used_at is not None
    (entry,) = _entries("passkey.sign_in")
    assert (entry.actor, entry.target, entry.outcome) == ("tester", str(passkey.pk), "ok")


def test_a_challenge_is_used_once(token):
    authenticator, _ = _registered(token)
    browser = Client()
    options = browser.post("/login/passkey/options").json()
    key = browser.session.session_key
    first, second = authenticator.get(options), authenticator.get(options)  # two answers to one challenge
    assert passkey_sign_in(credential=first, session_key=key).actor == "tester"
    with pytest.raises(Exception, match="expired or was used already"):
        passkey_sign_in(credential=second, session_key=key)
    refused = _entries("passkey.sign_in")[-1]
    assert refused.status_code == 400 and refused.params["reason"] == CHALLENGE_REFUSED

    # A registration's challenge too: a second authenticator answering the same options is refused.
    screen = _signed_in(token)
    options = screen.post("/passkeys/register/options").json()
    answers = [Authenticator(RP_ID, ORIGIN).create(options) for _ in range(2)]
    ok = screen.post("/passkeys/register", {"name": "a", "credential": answers[0]}, content_type="application/json")
    again = screen.post("/passkeys/register", {"name": "b", "credential": answers[1]}, content_type="application/json")
    assert ok.status_code == 201 and again.status_code == 400
    assert again.json()["detail"] == CHALLENGE_REFUSED
    assert list(Passkey.objects.filter(actor="tester").values_list("name", flat=True)) == ["a", "laptop"]


def test_an_expired_challenge_is_refused_and_journaled(token, settings):
    authenticator, _ = _registered(token)
    browser = Client()
    before = timezone.now()
    options = browser.post("/login/passkey/options").json()
    challenge = PasskeyChallenge.objects.get(purpose="sign_in")
    assert before + timedelta(seconds=119) < challenge.expires_at <= timezone.now() + timedelta(seconds=120)
    assert options["timeout"] == 120_000
    PasskeyChallenge.objects.filter(pk=challenge.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    response = browser.post(
        "/login/passkey", {"credential": authenticator.get(options)}, content_type="application/json"
    )
    assert response.status_code == 400 and response.json()["detail"] == CHALLENGE_REFUSED
    assert browser.get("/audit").status_code == 302  # not signed in
    entry = _entries("passkey.sign_in")[-1]
    assert entry.actor == "tester" and entry.outcome == "400 Bad request"
    assert entry.params == {"reason": CHALLENGE_REFUSED, "refused": []}
    browser.post("/login/passkey/options")
    assert not PasskeyChallenge.objects.filter(pk=challenge.pk).exists()  # expired ones go with the next issue


def test_a_challenge_belongs_to_the_session_it_was_given_to(token):
    authenticator, _ = _registered(token)
    options = Client().post("/login/passkey/options").json()
    other = Client()
    other.post("/login/passkey/options")  # a session of its own, not the one the challenge was given to
    response = other.post("/login/passkey", {"credential": authenticator.get(options)}, content_type="application/json")
    assert response.status_code == 400 and response.json()["detail"] == CHALLENGE_REFUSED


def test_a_revoked_passkey_signs_no_one_in_and_ends_its_sessions(authed, token):
    authenticator, passkey = _registered(token)
    browser, response = _sign_in(authenticator)
    assert response.status_code == 200 and browser.get("/audit").status_code == 200
    token_session = _signed_in(token)

    assert authed.delete(f"/api/passkeys/{passkey.pk}").status_code == 204
    passkey.refresh_from_db()
    assert passkey.revoked_at is not None
    (entry,) = _entries("passkey.revoke")
    assert (entry.actor, entry.target, entry.outcome, entry.status_code) == ("tester", str(passkey.pk), "ok", 204)

    after = browser.get("/audit")  # the session the passkey opened ends at its next request
    assert after.status_code == 302 and after["Location"].startswith("/login")
    assert token_session.get("/audit").status_code == 200  # one opened with the token goes on

    again, refused = _sign_in(authenticator)
    assert refused.status_code == 403 and refused.json()["detail"] == "This passkey has been revoked."
    assert again.get("/audit").status_code == 302
    entry = _entries("passkey.sign_in")[-1]
    assert (entry.actor, entry.target, entry.outcome) == ("tester", str(passkey.pk), "403 Forbidden")
    assert entry.params["reason"] == "This passkey has been revoked."
    assert authed.delete(f"/api/passkeys/{passkey.pk}").status_code == 404  # revoked already


def test_an_actor_without_an_active_token_signs_in_with_no_passkey(token):
    token_create(actor="tester", created_by="pytest")  # a second token of the actor
    authenticator, _ = _registered(token)
    browser, response = _sign_in(authenticator)
    assert response.status_code == 200
    token_revoke(revoked_by="pytest", prefix=token[:12])
    assert browser.get("/audit").status_code == 200  # the actor still holds a token
    token_revoke(revoked_by="pytest", actor="tester")
    assert browser.get("/audit").status_code == 302
    _, refused = _sign_in(authenticator)
    assert refused.status_code == 403 and "holds no active token" in refused.json()["detail"]


def test_a_bad_answer_is_refused_and_journaled(token):
    authenticator, passkey = _registered(token)
    for answer, words in [
        ({"origin": "http://evil.example"}, "origin"),
        ({"rp_id": "evil.example"}, "RP ID"),
    ]:
        browser, response = _sign_in(authenticator, **answer)
        assert response.status_code == 400 and words in response.json()["detail"], response.json()
        assert browser.get("/audit").status_code == 302
    stranger = Authenticator(RP_ID, ORIGIN, credential_id=authenticator.credential_id)  # same id, another key
    stranger.sign_count = 10
    _, response = _sign_in(stranger)
    assert response.status_code == 400 and "signature" in response.json()["detail"]
    unverified = Authenticator(RP_ID, ORIGIN, user_verified=False)
    response = _register(_signed_in(token), unverified)
    assert response.status_code == 400 and "verif" in response.json()["detail"].lower()
    _, unknown = _sign_in(Authenticator(RP_ID, ORIGIN))
    assert unknown.status_code == 403
    garbage = Client()
    garbage.post("/login/passkey/options")
    assert garbage.post("/login/passkey", "not json", content_type="application/json").status_code == 400
    outcomes = [(e.actor, e.outcome) for e in _entries("passkey.sign_in")]
    assert outcomes == [("tester", "400 Bad request")] * 3 + [("", "403 Forbidden"), ("", "400 Bad request")]
    assert _entries("passkey.register")[-1].outcome == "400 Bad request"
    passkey.refresh_from_db()
    assert passkey.sign_count == 0 and passkey.last_used_at is None  # no refused attempt counted as a use


def test_an_answer_from_another_origin_is_refused_in_words_naming_the_origins_and_the_setting(token):
    """The server on another port than its passkey origins: the refusal says where passkeys work and what to set
    (py_webauthn alone says "Unexpected client data origin")."""
    expected = (
        "This page's origin is http://localhost:9000, and passkeys work at http://localhost:8000 (PASSKEY_ORIGINS):"
        " open the page there, or set PASSKEY_ORIGINS and PASSKEY_RP_ID to where the screens are opened (`manage.py up`"
        " sets them from its --host and --port when PASSKEY_ORIGINS is unset)."
    )
    elsewhere = Authenticator(RP_ID, "http://localhost:9000")
    response = _register(_signed_in(token), elsewhere)
    assert response.status_code == 400 and response.json()["detail"] == expected
    authenticator, _ = _registered(token)
    _, response = _sign_in(authenticator, origin="http://localhost:9000")
    assert response.status_code == 400 and response.json()["detail"] == expected


def test_the_api_and_the_screen_list_rename_and_revoke_ones_own_passkeys(authed, token):
    _, laptop = _registered(token, "laptop")
    _, phone = _registered(token, "phone")
    _, raw = token_create(actor="operator", created_by="pytest")
    _, theirs = _registered(raw, "theirs")
    screen = _signed_in(token)

    listed = authed.get("/api/passkeys").json()
    assert [row["name"] for row in listed] == ["phone", "laptop"]
    assert set(listed[0]) == {"id", "actor", "name", "transports", "created_at", "last_used_at"}
    page = screen.get("/passkeys")
    assert page.status_code == 200 and [dict(row) for row in page.context["passkeys"]] == listed
    body = page.content.decode()
    assert "laptop" in body and "theirs" not in body and laptop.credential_id not in body

    renamed = authed.patch(f"/api/passkeys/{laptop.pk}", {"name": "  work laptop "}, format="json")
    assert renamed.status_code == 200 and renamed.json()["name"] == "work laptop"
    entry = _entries("passkey.rename")[-1]
    assert (entry.target, entry.outcome, entry.params) == (
        str(laptop.pk),
        "ok",
        {"name": "  work laptop ", "was": "laptop"},
    )
    assert authed.patch(f"/api/passkeys/{laptop.pk}", {"name": ""}, format="json").status_code == 400
    assert authed.patch(f"/api/passkeys/{theirs.pk}", {"name": "mine"}, format="json").status_code == 404
    assert authed.delete(f"/api/passkeys/{theirs.pk}").status_code == 404

    done = screen.post(f"/passkeys/{phone.pk}/rename", {"name": "old phone"})
    assert done.status_code == 302 and done["Location"] == "/passkeys"
    assert screen.post(f"/passkeys/{phone.pk}/rename", {"name": "x" * 101}).status_code == 400
    done = screen.post(f"/passkeys/{phone.pk}/revoke")
    assert done.status_code == 302 and done["Location"] == "/passkeys"
    assert screen.post(f"/passkeys/{theirs.pk}/revoke").status_code == 404
    assert [row["name"] for row in authed.get("/api/passkeys").json()] == ["work laptop"]
    assert [row["name"] for row in screen.get("/passkeys").context["passkeys"]] == ["work laptop"]
    assert [e.outcome for e in _entries("passkey.rename")] == [
        "ok",
        "400 Bad request",
        "404 Not found",
        "ok",
        "400 Bad request",
    ]
    assert [(e.actor, e.outcome) for e in _entries("passkey.revoke")] == [
        ("tester", "404 Not found"), ("tester", "ok"), ("tester", "404 Not found"),
    ]  # fmt: skip
    theirs.refresh_from_db()
    assert theirs.name == "theirs" and theirs.revoked_at is None


def test_the_passkey_screens_need_a_signed_in_operator(client, api, db):
    for method, path in [("get", "/passkeys"), ("post", "/passkeys/register/options"), ("post", "/passkeys/1/revoke")]:
        response = getattr(client, method)(path)
        assert response.status_code == 302 and response["Location"].startswith("/login"), path
    assert api.get("/api/passkeys").status_code == 401
    assert client.get("/login/passkey/options").status_code == 405
