"""The health screen in real headless Chromium at 1400x1000 with a real warm engine answering: its pools
table (eleven columns) stays inside the page, and the details read as words (`p50 ms`, not `p50_ms`)."""

from __future__ import annotations

import pytest

from tests.dispatcher.harness import wait_for
from tests.ops.test_convert_engine_health import (  # noqa: F401 (fixtures)
    START_SECONDS,
    _pool_ready,
    engine_serving,
    own_var_dir,
)
from tests.screens.conftest import sign_in_on_the_way

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


def test_the_health_screen_with_the_engine_s_pools_fits_a_1400_px_window(page, live_server, token, engine_serving):  # noqa: F811
    engine_serving()
    wait_for(_pool_ready, timeout=START_SECONDS, interval=0.1, message="the warm pool to be ready")
    page.set_viewport_size({"width": 1400, "height": 1000})
    sign_in_on_the_way(page, f"{live_server.url}/health", token)
    pools = page.locator('tr[data-check="convert_engine"] table[data-detail="pools"]')
    assert pools.locator("tbody tr").count() == 1
    header = pools.locator("th").all_inner_texts()
    assert "p50 ms" in header and "last error" in header and not [h for h in header if "_" in h], header
    assert page.evaluate("() => document.scrollingElement.scrollWidth") <= 1400
    table = page.locator("#health-checks").bounding_box()
    assert table["x"] + table["width"] <= 1400
    facts = page.locator('tr[data-check="dispatcher"] dl.facts').inner_text()
    assert "heartbeat age seconds" in facts and "heartbeat_age_seconds" not in facts
