"""The real browser for the screen tests: Debian's Chromium driven by Playwright for Python."""

from __future__ import annotations

import shutil
from collections.abc import Iterator

import pytest

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


@pytest.fixture
def page(monkeypatch: pytest.MonkeyPatch) -> Iterator:
    from playwright.sync_api import sync_playwright

    # Playwright's sync API keeps an event loop in this thread; the ORM calls the test makes beside it
    # are ordinary blocking calls, which Django would otherwise refuse in a thread with a running loop.
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    if not shutil.which("chromium"):
        pytest.fail("Chromium is not installed: apt-get install chromium (the screen tests drive the real browser)")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM,
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update"],
        )
        yield browser.new_page(viewport={"width": 1280, "height": 900})
        browser.close()


def sign_in_on_the_way(page, url: str, token: str) -> None:
    """Open a signed-in screen while signed out: the sign-in page comes first, then the screen itself."""
    page.goto(url)
    assert "/login" in page.url
    page.fill("#token", token)
    page.click("button[type=submit]")
    page.wait_for_url(url)
