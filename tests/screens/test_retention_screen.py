"""The retention screen in real headless Chromium: an admin previews a cutoff, confirms by typing it,
and the history before it is gone, under the screens' Content-Security-Policy."""

from __future__ import annotations

import pytest

from accounts.actions import token_create
from accounts.models import AuditEntry
from corpora.models import Run, Snapshot
from tests.runs.test_prune import _history
from tests.screens.conftest import sign_in_on_the_way
from tests.screens.test_csp_screens import _violations

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


def test_an_admin_previews_confirms_and_prunes(page, live_server, corpus_root, tmp_path):
    _history(corpus_root, "a")
    _, token = token_create(actor="boss", created_by="pytest", staff=True)
    violations = _violations(page)
    sign_in_on_the_way(page, f"{live_server.url}/runs/retention", token)
    page.fill("#before", "2020-01-16")
    page.click("#retention-preview button[type=submit]")
    page.wait_for_selector("#retention-pairs")
    row = page.locator("#retention-pairs tbody tr").first.inner_text()
    assert row.split("\t")[:6] == ["a", "tex_to_html", "2", "2", "2", "8"]

    page.click("#retention-prune button[type=submit]")  # without the date typed again: refused
    page.wait_for_selector("p.errorlist")
    assert "confirmation field" in page.inner_text("p.errorlist") and Snapshot.objects.count() == 3

    page.fill("#confirm", "2020-01-16")
    page.click("#retention-prune button[type=submit]")
    page.wait_for_selector("ul.messages")
    assert "Pruned 2 runs, 2 snapshots and 2 diffs" in page.inner_text("ul.messages")
    assert "Nothing to remove" in page.inner_text("#retention-pairs")
    assert Snapshot.objects.count() == 1 and Run.objects.count() == 2
    assert AuditEntry.objects.filter(action="runs.prune", actor="boss").count() == 1
    page.screenshot(path=tmp_path / "retention-screen.png", full_page=True)
    assert violations == []
