"""Passkeys in real headless Chromium with a virtual authenticator (the DevTools protocol's WebAuthn domain):
sign in with a token, register a passkey, sign out, sign in with the passkey, revoke it, and see the next
sign-in with it refused, all under the screens' Content-Security-Policy."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

import pytest

from accounts.models import AuditEntry, Passkey

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


@pytest.fixture
def origin(live_server, settings) -> str:
    """The live server as http://localhost:PORT: a secure context for WebAuthn, and a host name that can be
    the relying-party id (an IP address cannot)."""
    base = f"http://localhost:{urlsplit(live_server.url).port}"
    settings.PASSKEY_RP_ID, settings.PASSKEY_ORIGINS = "localhost", [base]
    return base


def _authenticator(page: Any) -> tuple[Any, str]:
    devtools = page.context.new_cdp_session(page)
    devtools.send("WebAuthn.enable")
    added = devtools.send(
        "WebAuthn.addVirtualAuthenticator",
        {
            "options": {
                "protocol": "ctap2",
                "transport": "internal",
                "hasResidentKey": True,
                "hasUserVerification": True,
                "isUserVerified": True,
            }
        },
    )
    return devtools, added["authenticatorId"]


def _sign_in_and_register(page: Any, origin: str, token: str, name: str) -> None:
    """Sign in at `origin` with the token, then register a passkey named `name` on the passkeys screen."""
    page.goto(f"{origin}/login?next=/passkeys")
    page.fill("#token", token)
    page.click("button[type=submit]")
    page.wait_for_url(f"{origin}/passkeys")
    page.fill("#passkey-name", name)
    page.click("#passkey-register button[type=submit]")
    page.wait_for_selector("#passkeys tr[data-passkey]")


def test_register_sign_in_with_the_passkey_revoke_and_be_refused(page, origin, token):
    problems: list[str] = []
    page.on("console", lambda m: problems.append(m.text) if "Content Security Policy" in m.text else None)
    page.on("pageerror", lambda error: problems.append(f"page error: {error}"))
    page.on("dialog", lambda dialog: dialog.accept())  # the revoke button asks first
    devtools, authenticator = _authenticator(page)

    _sign_in_and_register(page, origin, token, "virtual key")
    assert page.input_value("#passkeys tr[data-passkey] input[name=name]") == "virtual key"
    passkey = Passkey.objects.get()
    assert (passkey.actor, passkey.name, passkey.transports) == ("tester", "virtual key", ["internal"])
    (stored,) = devtools.send("WebAuthn.getCredentials", {"authenticatorId": authenticator})["credentials"]
    assert stored["isResidentCredential"] and stored["rpId"] == "localhost"

    page.click("header .who button")  # sign out
    page.wait_for_url(f"{origin}/login")
    page.goto(f"{origin}/login?next=/jobs")
    page.click("#passkey-sign-in-button")
    page.wait_for_url(f"{origin}/jobs")
    assert page.inner_text("header .who span") == "tester"

    page.goto(f"{origin}/passkeys")
    assert "(this session's)" in page.inner_text("#passkeys")
    page.click(f"#passkeys tr[data-passkey='{passkey.pk}'] form[action$='/revoke'] button")
    # The session was opened with the passkey it revoked: it ends, and the screen asks for a sign-in.
    page.wait_for_url(f"{origin}/login?next=/passkeys")
    passkey.refresh_from_db()
    assert passkey.revoked_at is not None

    page.click("#passkey-sign-in-button")
    page.wait_for_selector("#passkey-error:not([hidden])")
    assert page.inner_text("#passkey-error") == "This passkey has been revoked."
    assert page.url == f"{origin}/login?next=/passkeys"
    assert page.goto(f"{origin}/jobs").url.startswith(f"{origin}/login")

    journal = list(
        AuditEntry.objects.filter(action__startswith="passkey.").order_by("id").values_list("action", "outcome")
    )
    assert journal == [
        ("passkey.register", "ok"),
        ("passkey.sign_in", "ok"),
        ("passkey.revoke", "ok"),
        ("passkey.sign_in", "403 Forbidden"),
    ]
    assert problems == []
