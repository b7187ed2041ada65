"""The logs screen in real headless Chromium at 1400x1000: a table of time, level, source and message that
fits the window however long a message is, filtered by level (Celery's routine lines are debug, hidden by
the default of info and above) and by source (process, logger), each filter a query parameter of a link."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from config.logsink import STREAM, RedisLogHandler
from config.redis_client import redis_client
from tests.screens.conftest import sign_in_on_the_way

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

SCHEDULER_LINE = "Scheduler: Sending due task jobs-sweep-interrupted (jobs.tasks.jobs_sweep)"
LONG = "conversion of arXiv:2411.00001 left " + "x" * 2500 + " behind"


@pytest.fixture
def wide_page(page):
    page.set_viewport_size({"width": 1400, "height": 1000})
    return page


@pytest.fixture
def stream() -> Iterator[None]:
    client = redis_client()
    client.delete(STREAM)
    yield
    client.delete(STREAM)


def _emit(monkeypatch: pytest.MonkeyPatch, process: str, logger: str, level: int, message: str) -> None:
    """A record written to the stream as the process `process` writes it (its role under `up`)."""
    monkeypatch.setenv("CCS_PROCESS", process)
    handler = RedisLogHandler()
    handler.emit(logging.LogRecord(logger, level, __file__, 1, "%s", (message,), None))
    assert handler.dropped == 0


def _rows(page) -> list[tuple[str, str, str]]:
    """(level, process, logger) of each row of the table."""
    return [
        (row.get_attribute("data-level"), row.get_attribute("data-process"), row.get_attribute("data-logger"))
        for row in page.locator("table#logs tbody tr").all()
    ]


def _width(page) -> int:
    return page.evaluate("() => document.scrollingElement.scrollWidth")


def _filter(page, field: str, value: str) -> None:
    page.select_option(f"#logs-filters select[name={field}]", value)
    with page.expect_navigation():
        page.click("#logs-filters button[type=submit]")


def test_the_logs_fit_the_window_and_filter_by_level_and_source(wide_page, live_server, token, stream, monkeypatch):
    page = wide_page
    _emit(monkeypatch, "celery-beat", "celery.beat", logging.INFO, "beat: Starting...")
    _emit(monkeypatch, "celery-beat", "celery.beat", logging.INFO, SCHEDULER_LINE)
    _emit(monkeypatch, "celery-worker", "celery.app.trace", logging.INFO,
          "Task jobs.tasks.jobs_sweep[0f4c2e1a-7c1b-4f7e-9a55-2b1d3c4e5f60] succeeded in 0.01s: None")  # fmt: skip
    _emit(monkeypatch, "dispatcher", "dispatcher.server", logging.WARNING, LONG)
    _emit(monkeypatch, "web", "jobs.runner", logging.ERROR, "job import 42 crashed")
    sign_in_on_the_way(page, f"{live_server.url}/logs", token)

    headers = page.locator("table#logs thead th").all_inner_texts()
    assert [text.strip() for text in headers] == ["Time", "Level", "Source", "Message"]
    assert _width(page) <= 1400, "the page is wider than the window"
    assert LONG in page.inner_text("table#logs")  # wrapped in its cell, not cut
    assert page.input_value("#logs-filters select[name=level]") == "INFO"
    shown = page.inner_text("table#logs")
    assert "beat: Starting..." in shown and "job import 42 crashed" in shown
    assert "Scheduler: Sending due task" not in shown and "succeeded in" not in shown
    assert ("DEBUG", "celery-beat", "celery.beat") not in _rows(page)

    _filter(page, "level", "DEBUG")
    assert "level=DEBUG" in page.url
    assert SCHEDULER_LINE in page.inner_text("table#logs")
    row = page.locator("table#logs tbody tr", has_text=SCHEDULER_LINE)
    assert row.locator("td.level").inner_text().strip() == "debug"

    _filter(page, "process", "celery-beat")
    assert "process=celery-beat" in page.url
    assert {process for _, process, _ in _rows(page)} == {"celery-beat"} and len(_rows(page)) == 2

    _filter(page, "process", "")
    _filter(page, "logger", "jobs.runner")
    assert _rows(page) == [("ERROR", "web", "jobs.runner")]

    _filter(page, "logger", "")
    _filter(page, "level", "WARNING")
    assert [level for level, _, _ in _rows(page)] == ["ERROR", "WARNING"]
    assert _width(page) <= 1400

    page.goto(f"{live_server.url}/logs?process=dispatcher&level=DEBUG")  # a filtered view is a link
    assert _rows(page) == [("WARNING", "dispatcher", "dispatcher.server")]
    assert page.input_value("#logs-filters select[name=process]") == "dispatcher"
