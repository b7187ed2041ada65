"""Report URLs are built where the report screens are, reports.links: every path is the named route's, names
escaped whole (config.links.route)."""

from __future__ import annotations

import re
from pathlib import Path

from django.urls import resolve

from reports.links import document_file_url, document_result_url, document_url, is_report_url, report_url

ROOT = Path(__file__).resolve().parents[2]


def test_report_urls_escape_every_name_as_one_segment_and_resolve_to_their_screens():
    assert report_url("c", "s") == "/reports/c/s"
    assert report_url("c", "s", "error") == "/reports/c/s/error"
    assert report_url("c", "s", "error", "I/O", "../x//y") == "/reports/c/s/error/I%2FO/..%2Fx%2F%2Fy"
    assert resolve(report_url("c", "s", "error", "I/O")).url_name == "corpus-report-drill"
    # A name shaped like the route's markers is escaped, never substituted again.
    assert report_url("c", "s", "error", "__severity__") == "/reports/c/s/error/__severity__"
    assert document_url("c", "s", "a b/c") == "/corpus/c/s/document/a%20b%2Fc"
    assert document_result_url("c", "s", "d") == "/corpus/c/s/document/d/result.zip"
    assert document_file_url("c", "s", "d", "img/a b.png") == "/corpus/c/s/document/d/files/img/a%20b.png"
    assert is_report_url("/reports/c/s/error?offset=100") and not is_report_url("/reportsx/c")


def test_no_product_module_builds_a_report_or_document_path_by_hand():
    """Outside the links modules (and the route tables), no string literal spells a report path. `cli` is the
    exception: ccs is a client of the API without Django, so it cannot reverse a route; the paths it sends
    are checked against the route table instead (tests/cli: every write's URL resolves to one of its
    operations, every read and download answers what the API answers at its path)."""
    pattern = re.compile(r"""["'](/api)?/(reports|corpus)/|/document/[{"']|/files/\{""")
    offenders = []
    for path in ROOT.glob("*/**/*.py"):
        relative = path.relative_to(ROOT).as_posix()
        if relative.split("/")[0] in {"tests", "bench", "scripts", "cli"} or relative.endswith(
            ("/urls.py", "links.py")
        ):
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            code = line.split("#", 1)[0]
            if pattern.search(code) and '"""' not in code:
                offenders.append(f"{relative}:{number}: {line.strip()}")
    assert offenders == []
