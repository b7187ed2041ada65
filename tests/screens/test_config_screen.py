"""The configuration screen in real headless Chromium: an operator sets a live key and a key read at start,
sees which one waits for a restart, is told why a wrong value changed nothing, and resets a key; every
change is journaled as the API's are, under the screens' Content-Security-Policy."""

from __future__ import annotations

import pytest
from django.conf import settings

from accounts.models import AuditEntry
from config.live import get_config
from config.screens import human
from ops.models import ConfigOverride
from tests.screens.conftest import sign_in_on_the_way
from tests.screens.test_csp_screens import _violations

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


def _set(page, key: str, value: str) -> None:
    row = page.locator(f'tr[data-key="{key}"]')
    row.locator("form.config-set input[name=value]").fill(value)
    row.locator("form.config-set button").click()
    page.wait_for_selector("ul.messages")


def test_an_operator_sets_resets_and_is_refused_on_the_config_screen(page, live_server, token, tmp_path):
    violations = _violations(page)
    sign_in_on_the_way(page, f"{live_server.url}/config", token)
    environment = settings.CONFIG_ENVIRONMENT

    _set(page, "jobs.stall_seconds", "77")
    assert "jobs.stall_seconds = 77" in page.inner_text("ul.messages")
    row = page.locator('tr[data-key="jobs.stall_seconds"]')
    assert (row.locator("td.value").inner_text(), row.locator("td.source").inner_text()) == ("1 min 17 s", "api")
    assert row.locator("td.running").inner_text() == "same"  # live: this process runs with it already
    assert get_config().JOB_STALL_SECONDS == 77 and environment["jobs.stall_seconds"] == settings.JOB_STALL_SECONDS

    _set(page, "pool.max", "3")
    assert "Restart needed for: pool.max" in page.inner_text("ul.messages")
    running = page.locator('tr[data-key="pool.max"] td.running').inner_text()
    assert running == f"restart pending: {environment['pool.max']}"

    _set(page, "dispatcher.max_in_flight", "many")
    assert "Nothing changed: dispatcher.max_in_flight must be a whole number" in page.inner_text("ul.messages")
    assert not ConfigOverride.objects.filter(key="dispatcher.max_in_flight").exists()
    assert not page.locator('tr[data-key="database.url"] form').count()  # environment only: no form

    page.locator('tr[data-key="jobs.stall_seconds"] form.config-reset button').click()
    page.wait_for_selector("ul.messages")
    row = page.locator('tr[data-key="jobs.stall_seconds"]')
    assert row.locator("td.source").inner_text() in ("default", "environment")
    assert row.locator("td.value").inner_text() == human(environment["jobs.stall_seconds"], "jobs.stall_seconds")
    assert not row.locator("form.config-reset").count()
    assert environment["jobs.stall_seconds"] == settings.JOB_STALL_SECONDS

    journal = [(e.params.get("after"), e.status_code) for e in AuditEntry.objects.filter(action="config.set")]
    assert journal[::-1] == [
        ({"jobs.stall_seconds": 77}, None),
        ({"pool.max": 3}, None),
        (None, 400),
        ({"jobs.stall_seconds": environment["jobs.stall_seconds"]}, None),
    ]
    page.screenshot(path=tmp_path / "config-screen.png", full_page=True)
    assert violations == []
