"""The workers screen in real headless Chromium: what each worker's heartbeats say (conversions, peak memory
in human units, kills by reason, the latest heartbeat) beside the dispatcher's tallies, "no heartbeat" for a
worker that sends none, and the rows following a new heartbeat without a reload, under the screens' policy."""

from __future__ import annotations

import pytest
from django.utils import timezone

from services.actions import service_register
from services.models import Service, Worker
from tests.screens.conftest import sign_in_on_the_way
from tests.screens.test_csp_screens import _violations

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


def _cells(page, identity: str) -> dict[str, str]:
    row = page.locator(f'tr[data-worker="{identity}"]')
    return {
        name: " ".join(row.locator(f"td.{name}").inner_text().replace("\xa0", " ").split())
        for name in ("conversions", "peak-rss", "kills", "heartbeat")
    }


def test_the_workers_screen_shows_what_the_heartbeats_say(page, live_server, token, tmp_path):
    violations = _violations(page)
    service_register(name="tex_to_html", actor="tester")
    service = Service.objects.get(name="tex_to_html")
    now = timezone.now()
    beat = now.replace(microsecond=0)
    Worker.objects.create(
        identity="beating:1", service=service, dispatched=12, returned=11, first_seen=now, last_seen=now,
        conversions=11, peak_rss=432_013_312, kills={"timeout": 2, "memory": 1}, heartbeat_at=beat,
    )  # fmt: skip
    Worker.objects.create(identity="cortex:2", service=service, dispatched=4, returned=4, first_seen=now, last_seen=now)

    sign_in_on_the_way(page, f"{live_server.url}/services/tex_to_html/workers", token)
    assert _cells(page, "beating:1") == {
        "conversions": "11",
        "peak-rss": "412.0 MB",
        "kills": "timeout 2 · memory 1",
        "heartbeat": beat.strftime("%Y-%m-%dT%H:%M:%S"),
    }
    assert page.locator('tr[data-worker="beating:1"] span.kill[data-reason="memory"]').inner_text() == "memory 1"
    dash = "\u2013"  # what a worker with no heartbeat shows for the counts only heartbeats give
    expected = {"conversions": dash, "peak-rss": dash, "kills": dash, "heartbeat": "no heartbeat"}
    assert _cells(page, "cortex:2") == expected

    # A new heartbeat: the rows follow within their 2 s refresh, the page is not reloaded.
    page.evaluate("window.notReloaded = true")
    Worker.objects.filter(identity="beating:1").update(
        conversions=12, peak_rss=3 * 1024**3, kills={"timeout": 2, "memory": 1, "governor": 1}
    )
    page.wait_for_function(  # a function, not an expression: the screens' CSP forbids eval()
        "() => document.querySelector('tr[data-worker=\"beating:1\"] td.conversions').innerText === '12'",
        timeout=10_000,
    )
    assert _cells(page, "beating:1")["peak-rss"] == "3.0 GB"
    assert _cells(page, "beating:1")["kills"] == "timeout 2 · memory 1 · governor 1"
    assert page.evaluate("window.notReloaded === true")
    page.screenshot(path=tmp_path / "workers-screen.png", full_page=True)
    assert violations == []
