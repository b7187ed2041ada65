"""Passkeys on the web server `manage.py up` starts on a port of its own (not 8000), in real Chromium with a
virtual authenticator: at http://localhost:PORT they register and sign in with nothing set but --port; at
http://127.0.0.1:PORT (no IP address can be a relying party) the page says where they work, with a link."""

from __future__ import annotations

import os

import pytest

from tests.ops.test_up import Up, _ports
from tests.screens.test_passkey_screens import _authenticator, _sign_in_and_register

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


def test_passkeys_work_at_localhost_on_ups_port_and_127_0_0_1_says_to_open_that(page, tmp_path):
    from tests.support import test_database_url

    env = {k: v for k, v in os.environ.items() if not k.startswith("PASSKEY_")}
    env.update(DATABASE_URL=test_database_url(), DB_POOL="false", VAR_DIR=str(tmp_path), CONVERT_WARM="false")
    port, dispatcher = _ports()
    up = Up(port, "--workers", "0", "--no-demo", env={**env, **dispatcher})
    try:
        token = up.wait_for("TOKEN=").split("=", 1)[1]
        up.wait_for("Ready: ")
        problems: list[str] = []
        page.on("pageerror", lambda error: problems.append(f"page error: {error}"))
        devtools, authenticator = _authenticator(page)
        here, there = f"http://127.0.0.1:{port}", f"http://localhost:{port}"

        page.goto(f"{here}/login?next=/passkeys")
        page.wait_for_selector("#passkey-sign-in #passkey-error:not([hidden])")
        assert page.inner_text("#passkey-sign-in #passkey-error") == (
            f"Passkeys do not work at {here}: they work at {there}. Open this page there: {there}/login?next=/passkeys."
            " To use them at this address, set PASSKEY_ORIGINS and PASSKEY_RP_ID (a host name, not an IP address);"
            " `manage.py up` sets them from its --host and --port when PASSKEY_ORIGINS is unset."
        )
        assert page.is_disabled("#passkey-sign-in-button")
        background = "(selector) => getComputedStyle(document.querySelector(selector)).backgroundColor"
        disabled_colour = page.evaluate(background, "#passkey-sign-in-button")
        page.click("#passkey-error a")  # to where they work
        page.wait_for_url(f"{there}/login?next=/passkeys")
        assert page.is_hidden("#passkey-sign-in #passkey-error") and page.is_enabled("#passkey-sign-in-button")
        assert page.evaluate(background, "#passkey-sign-in-button") != disabled_colour  # a disabled button looks so

        _sign_in_and_register(page, there, token, "virtual key")
        (stored,) = devtools.send("WebAuthn.getCredentials", {"authenticatorId": authenticator})["credentials"]
        assert stored["rpId"] == "localhost"

        page.click("header .who button")  # sign out
        page.wait_for_url(f"{there}/login")
        page.goto(f"{there}/login?next=/jobs")
        page.click("#passkey-sign-in-button")
        page.wait_for_url(f"{there}/jobs")
        assert page.inner_text("header .who span") == "admin"
        assert problems == []
        assert up.stop() == 0
    finally:
        if up.process.poll() is None:
            up.process.kill()
