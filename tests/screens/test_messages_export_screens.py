"""The download links of every report level in real headless Chromium: each level offers its messages in
every format of GET /api/reports/{corpus}/{service}/messages, and following a link downloads that slice's
rows, under the screens' Content-Security-Policy and without signing in."""

from __future__ import annotations

from pathlib import Path

import pytest
from rest_framework.test import APIClient

from reports.links import messages_export_url
from tests.reports.test_messages_export import rows_of
from tests.screens.test_csp_screens import _violations
from tests.screens.test_report_screens import converted  # noqa: F401  (the fixture: corpus c, converted)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

SERVICE = "tex_to_html"
ERROR_DOCUMENT = "x y%z"
# Each report level's screen, its slice, and the format whose link the test follows there.
LEVELS = [
    ("/reports/c/tex_to_html", (), "jsonl"),
    ("/reports/c/tex_to_html/error", ("error",), "parquet"),
    ("/reports/c/tex_to_html/error/I%2FO", ("error", "I/O"), "csv"),
    ("/reports/c/tex_to_html/error/I%2FO/a%20b%2Fc%3Fd%23e", ("error", "I/O", "a b/c?d#e"), "csv"),
]


def _expected(scope: tuple[str, ...]) -> list[dict[str, str]]:
    """The slice's rows from the error document's report (the only document with messages)."""
    report = APIClient().get(f"/api/corpus/c/{SERVICE}/document/x%20y%25z").json()
    rows = [
        {"document": ERROR_DOCUMENT, "entry": report["entry"], "status": report["status"],
         **{key: message[key] for key in ("severity", "category", "what", "details")}}
        for message in report["messages"]
    ]  # fmt: skip
    names = ("severity", "category", "what")
    return [row for row in rows if all(row[name] == value for name, value in zip(names, scope, strict=False))]


def test_every_report_level_links_its_messages_in_each_format_and_the_link_downloads_them(
    page,
    live_server,
    converted,  # noqa: F811
    tmp_path,
):
    violations = _violations(page)
    for path, scope, followed in LEVELS:
        response = page.goto(f"{live_server.url}{path}")
        assert response.status == 200, path
        links = page.locator("#messages-export a[download]")
        assert [links.nth(i).get_attribute("data-format") for i in range(links.count())] == ["csv", "jsonl", "parquet"]
        for i in range(links.count()):
            format_name = links.nth(i).get_attribute("data-format")
            assert links.nth(i).get_attribute("href") == messages_export_url(
                "c", SERVICE, *scope, format_name=format_name
            ), path
        with page.expect_download() as started:
            page.click(f"#messages-export a[data-format='{followed}']")
        download = started.value
        assert download.failure() is None, path
        assert download.suggested_filename.startswith(f"messages-c-{SERVICE}") and download.suggested_filename.endswith(
            f".{followed}"
        )
        saved = tmp_path / download.suggested_filename
        download.save_as(saved)
        rows = rows_of(Path(saved).read_bytes(), followed)
        assert rows and rows == _expected(scope), path
    assert violations == []
