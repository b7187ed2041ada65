"""Report reads only read: a missing grain slice is built by the ensure-slice action, never by a query."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from config.api.paging import Page
from jobs.models import Job
from reports.actions import slice_ensure
from reports.models import GrainSlice, ReportGrain
from reports.queries import category_report, what_report
from tests.reports.test_api import converted  # noqa: F401 (the fixture)

pytestmark = pytest.mark.django_db

PAGE = Page(offset=0, page_size=100)


def test_reading_a_report_of_a_missing_slice_builds_nothing(converted):  # noqa: F811
    report = category_report("c", "tex_to_html", "error", PAGE, computing=True)
    assert report["computing"] is True and report["rows"] == []
    assert what_report("c", "tex_to_html", "error", "undefined", PAGE, computing=True)["rows"] == []
    assert not GrainSlice.objects.exists() and not ReportGrain.objects.exists()
    assert not Job.objects.filter(kind="report_slice_build").exists()


def test_ensure_slice_builds_within_the_budget_and_the_read_then_finds_it(converted):  # noqa: F811
    assert slice_ensure(corpus_name="c", service_name="tex_to_html", severity="error") is True
    assert GrainSlice.objects.filter(severity="error").count() == 1
    rows = {row["name"]: row["tasks"] for row in category_report("c", "tex_to_html", "error", PAGE)["rows"]}
    assert rows == {"undefined": 3, "I/O": 2}
    assert not Job.objects.filter(kind="report_slice_build").exists()


def test_the_reports_queries_module_imports_no_actions():
    tree = ast.parse(Path(__file__).resolve().parents[2].joinpath("reports/queries.py").read_text())
    imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert not {name for name in imported if name and name.endswith(".actions")}
