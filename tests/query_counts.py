"""What the pinned statement counts of the report, run and document pages share: the live configuration held
still, and the statements of a page's second read."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from config import live


@pytest.fixture(autouse=True)
def config_synced(monkeypatch) -> None:
    """The live configuration checked just now and not again during the test: its poll runs on a timer
    (config.live.SYNC_SECONDS), not for a page."""
    monkeypatch.setattr(live, "SYNC_SECONDS", 3600.0)
    live.config_refresh(force=True)


def statements(client, path: str) -> list[str]:
    """The SQL of a second read of `path` (200 both times)."""
    assert client.get(path).status_code == 200, path
    with CaptureQueriesContext(connection) as captured:
        response = client.get(path)
    assert response.status_code == 200, path
    return [query["sql"] for query in captured.captured_queries]
