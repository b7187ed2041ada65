"""The health, configuration, jobs and journal screens in real headless Chromium at 1400x1000 show values
for people: sizes in KB/MB/GB, counts with thousands separators, yes or no, a mapping as `key: value`
lines; never a Python repr (True, None, {'...'}) nor a bare byte count. Each configuration key says what it
governs."""

from __future__ import annotations

import re

import pytest
from django.utils import timezone

from accounts.models import AuditEntry
from jobs.models import JobState
from ops.actions import config_update
from tests.factories import JobFactory
from tests.screens.conftest import sign_in_on_the_way

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

REPRS = re.compile(r"\b(True|False|None)\b|\{'|\[\{|\b\d{8,}\b")
SIZE = re.compile(r"\b\d[\d,]*(\.\d)? (KB|MB|GB|TB)\b")


@pytest.fixture
def wide_page(page):
    page.set_viewport_size({"width": 1400, "height": 1000})
    return page


def _no_reprs(text: str) -> None:
    found = REPRS.findall(text)
    assert not REPRS.search(text), f"Python reprs or bare byte counts on the screen: {found}"


def test_health_details_are_sizes_yes_no_and_key_value_lines(wide_page, live_server, token, corpus_root):
    page = wide_page
    sign_in_on_the_way(page, f"{live_server.url}/health", token)
    checks = page.inner_text("#health-checks")
    _no_reprs(checks)
    free = page.locator('tr[data-check="results_dir"] dl.facts').inner_text()
    assert re.search(r"free bytes\s+" + SIZE.pattern, free), free
    assert re.search(r"writable\s+yes", free), free
    assert re.search(r"reachable\s+yes", page.locator('tr[data-check="postgresql"]').inner_text())
    roots = page.locator('tr[data-check="corpus_roots"] table[data-detail="roots"]').inner_text()
    assert SIZE.search(roots) and "yes" in roots, roots
    assert page.evaluate("() => document.scrollingElement.scrollWidth") <= 1400


def test_every_configuration_key_is_described_and_shown_for_people(wide_page, live_server, token):
    page = wide_page
    config_update({"dispatcher": {"longest_first": False}, "results": {"min_free_mb": 2048}}, actor="tester")
    sign_in_on_the_way(page, f"{live_server.url}/config", token)
    rows = page.locator("#config-entries tbody tr")
    assert rows.count() > 30
    for row in rows.all():
        key = row.get_attribute("data-key")
        assert len(row.locator("p.description").inner_text().strip()) > 10, f"{key} has no description"
    value = {
        key: page.locator(f'tr[data-key="{key}"] td.value').inner_text()
        for key in ("dispatcher.longest_first", "pool.enabled", "results.min_free_mb", "results.max_bytes",
                    "jobs.stall_seconds", "dispatcher.ventilator_port")
    }  # fmt: skip
    assert value["dispatcher.longest_first"] == "no" and value["pool.enabled"] in ("yes", "no")
    assert value["results.min_free_mb"] == "2.0 GB" and SIZE.fullmatch(value["results.max_bytes"])
    assert re.fullmatch(r"\d+ min( \d+ s)?|\d+ s", value["jobs.stall_seconds"])
    assert re.fullmatch(r"\d+", value["dispatcher.ventilator_port"])  # a port is a name, not a count
    assert "true" not in page.inner_text("#config-entries td.value").lower().split()
    assert page.evaluate("() => document.scrollingElement.scrollWidth") <= 1400


def test_a_job_s_parameters_result_and_progress_read_as_values(wide_page, live_server, token):
    page = wide_page
    job = JobFactory(
        kind="corpus_import", state=JobState.SUCCEEDED, started_at=timezone.now(), finished_at=timezone.now(),
        params={"corpus": "arxiv", "formats": ["tex_to_html"], "dry_run": False, "limit": None},
        result={"tex_to_html": 1, "documents": 1234567, "archive_bytes": 79258345472},
        progress_current=1234567, progress_total=1234567,
    )  # fmt: skip
    sign_in_on_the_way(page, f"{live_server.url}/jobs", token)
    assert "1,234,567 / 1,234,567" in page.locator(f"tr[data-job='{job.pk}']").inner_text()
    page.goto(f"{live_server.url}/jobs/{job.pk}")
    body = page.inner_text("#job-body")
    _no_reprs(body)
    result = page.inner_text("#job-result")
    assert "tex_to_html: 1" in result and "documents: 1,234,567" in result and "archive_bytes: 73.8 GB" in result
    assert "dry_run: no" in body and "formats: tex_to_html" in body and "limit: —" in body


def test_the_journal_shows_parameters_as_key_value_lines(wide_page, live_server, token):
    page = wide_page
    config_update({"dispatcher": {"longest_first": False}}, actor="tester")
    AuditEntry.objects.create(
        actor="tester", action="corpus.import", target="arxiv", outcome="ok",
        params={"path": "/srv/corpora/arxiv", "overwrite": True, "limit": None, "sizes": {"max_bytes": 67108864}},
    )  # fmt: skip
    sign_in_on_the_way(page, f"{live_server.url}/audit", token)
    journal = page.inner_text("#audit")
    _no_reprs(journal)
    assert "overwrite: yes" in journal and "limit: —" in journal and "max_bytes: 64.0 MB" in journal
    assert "dispatcher.longest_first: no" in journal
    assert page.evaluate("() => document.scrollingElement.scrollWidth") <= 1400
