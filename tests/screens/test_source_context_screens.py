"""The document screen in Chromium shows the source around a located message: the markup of a source line is
text (no script runs, no element is made of it), the message's line is marked and so is its column."""

from __future__ import annotations

import pytest

from tests.reports.test_source_context import SCRIPT_LINE, located  # noqa: F401 (located: the fixture)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


def test_a_source_line_holding_a_script_stays_text_in_chromium(page, live_server, located, tmp_path):  # noqa: F811
    alerts: list[str] = []
    page.on("dialog", lambda dialog: (alerts.append(dialog.message), dialog.dismiss()))
    page.set_viewport_size({"width": 1400, "height": 1000})
    page.goto(f"{live_server.url}/corpus/s/tex_to_html/document/papertar")
    block = page.locator("pre.source-context[data-file='sec/body.tex'][data-line='7']")
    marked = block.locator(".source-line.marked")
    assert marked.count() == 1
    assert marked.inner_text() == "7" + SCRIPT_LINE
    assert marked.locator("mark.source-column").inner_text() == "\\"
    assert block.locator(".source-line .line-number").all_inner_texts() == ["5", "6", "7", "8", "9"]
    # The line's <script> is text: no element of the page came from it, and nothing ran.
    assert page.evaluate("() => [...document.scripts].filter(s => s.textContent.includes('alert')).length") == 0
    assert alerts == []
    # Three of the six located messages have context: a package's file, a path that climbs out and a line
    # past the file's end have none.
    assert page.locator("pre.source-context").count() == 3
    page.screenshot(path=tmp_path / "document-source-context.png", full_page=True)
