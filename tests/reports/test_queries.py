"""Report reads only read: a missing grain slice is built by the ensure-slice action, never by a query."""

from __future__ import annotations

import ast
import itertools
import re
from pathlib import Path

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from config.api.paging import Page
from corpora.actions.reports import slice_ensure
from corpora.models import GrainSlice, ReportGrain
from corpora.queries.corpora import pair_resolve
from corpora.queries.reports import category_report, document_report, what_report
from jobs.models import Job
from tests.reports.test_api import converted  # noqa: F401 (the fixture)

pytestmark = pytest.mark.django_db

PAGE = Page(offset=0, page_size=100)


def test_reading_a_report_of_a_missing_slice_builds_nothing(converted):  # noqa: F811
    pair = pair_resolve("c", "tex_to_html")
    report = category_report(pair, "error", PAGE, computing=True)
    assert report.computing is True and report.rows == []
    assert what_report(pair, "error", "undefined", PAGE, computing=True).rows == []
    assert not GrainSlice.objects.exists() and not ReportGrain.objects.exists()
    assert not Job.objects.filter(kind="report_slice_build").exists()


def test_ensure_slice_builds_within_the_budget_and_the_read_then_finds_it(converted):  # noqa: F811
    pair = pair_resolve("c", "tex_to_html")
    assert slice_ensure(pair=pair, severity="error") is True
    assert GrainSlice.objects.filter(severity="error").count() == 1
    rows = {row.name: row.tasks for row in category_report(pair, "error", PAGE).rows}
    assert rows == {"undefined": 3, "I/O": 2}
    assert not Job.objects.filter(kind="report_slice_build").exists()


def test_the_reports_queries_module_imports_no_actions():
    tree = ast.parse(Path(__file__).resolve().parents[2].joinpath("corpora/queries/reports.py").read_text())
    imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert not {name for name in imported if name and name.endswith(".actions")}


def _runtimes_expected(service_id: int) -> dict:
    """The runtime report's figures computed straight from the runtimes, by PostgreSQL's own aggregates."""
    from django.db import connection

    from corpora.queries.reports import RUNTIME_BUCKETS_MS

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*), round(avg(runtime_ms), 1), max(runtime_ms),"
            " percentile_disc(ARRAY[0.5, 0.9, 0.99]) WITHIN GROUP (ORDER BY runtime_ms)"
            " FROM corpora_taskruntime WHERE service_id = %s",
            [service_id],
        )
        count, mean, maximum, percentiles = cursor.fetchone()
        cursor.execute(
            "SELECT width_bucket(runtime_ms, %s::integer[]), count(*) FROM corpora_taskruntime"
            " WHERE service_id = %s GROUP BY 1",
            [RUNTIME_BUCKETS_MS, service_id],
        )
        buckets = dict(cursor.fetchall())
    return {
        "count": count,
        "mean_ms": float(mean) if mean is not None else None,
        "max_ms": maximum,
        "percentiles": percentiles or [None, None, None],
        "histogram": [buckets.get(index, 0) for index in range(len(RUNTIME_BUCKETS_MS) + 1)],
    }


def test_runtime_percentiles_found_through_bins_equal_percentile_disc():
    """Count, mean, histogram and percentiles come from the 50 ms bins and the millisecond rows of one
    bin each; after inserts, updates and deletes they equal the aggregates over the runtimes themselves.
    The runtimes crowd a few bins, with repeats, on both sides of bin and bucket edges, so a percentile
    taken from the wrong bin, or from the right bin at the wrong offset, differs."""
    from django.db import connection

    from corpora.models import RuntimeBin
    from corpora.queries.reports import runtime_report
    from services.models import Service

    service = Service.objects.create(name="timed")
    other = Service.objects.create(name="other")
    runtimes = [49, 50, 50, 51, 99, 100, 100, 101, 149, 150, 249, 250, 251, 999, 1000, 2499, 2500, 70000]
    runtimes += [120 + index % 7 for index in range(40)] + [300000, 300049, 300050, 4_000_000]
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO corpora_taskruntime (task_id, corpus_id, service_id, runtime_ms)"
            " SELECT 1000 + n, 1, %s, r FROM unnest(%s::integer[]) WITH ORDINALITY AS u(r, n)",
            [service.pk, runtimes],
        )
        cursor.execute(
            "INSERT INTO corpora_taskruntime (task_id, corpus_id, service_id, runtime_ms) VALUES (1, 1, %s, 1)",
            [other.pk],
        )

    def check() -> None:
        report = runtime_report("timed", PAGE)
        expected = _runtimes_expected(service.pk)
        assert {
            "count": report.count,
            "mean_ms": report.mean_ms,
            "max_ms": report.max_ms,
            "percentiles": [report.p50_ms, report.p90_ms, report.p99_ms],
            "histogram": [bucket.count for bucket in report.histogram],
        } == expected

    check()
    assert RuntimeBin.objects.filter(service=service, count__gt=0).count() < len(set(runtimes))
    with connection.cursor() as cursor:
        for statement in (
            "DELETE FROM corpora_taskruntime WHERE service_id = %s AND runtime_ms BETWEEN 120 AND 123",
            "UPDATE corpora_taskruntime SET runtime_ms = runtime_ms + 37 WHERE service_id = %s AND runtime_ms < 300",
            "DELETE FROM corpora_taskruntime WHERE service_id = %s AND runtime_ms > 100000",
        ):
            cursor.execute(statement, [service.pk])
            check()
        cursor.execute("DELETE FROM corpora_taskruntime WHERE service_id = %s", [service.pk])
    assert runtime_report("timed", PAGE).count == 0 and _runtimes_expected(service.pk)["count"] == 0
    assert runtime_report("other", PAGE).p50_ms == 1


def test_a_documents_task_is_found_through_the_documents_corpus_and_name_key(converted):  # noqa: F811
    """The document page's task lookup gives the documents' scan their corpus as well as the name, which
    lets it probe the (corpus, name) key: by name alone it scans every document of every corpus. Which scan
    the planner picks on a few rows varies; the corpus among the document's conditions does not."""
    name = converted[0].document.name
    with CaptureQueriesContext(connection) as captured:
        document_report(pair_resolve("c", "tex_to_html"), name)
    sql = next(q["sql"] for q in captured.captured_queries if '"corpora_document"' in q["sql"])
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute(f"EXPLAIN {sql}")
        plan = "\n".join(row[0] for row in cursor.fetchall())
    # The document's node and what lies under it (its conditions, a bitmap's index scan): the lines indented
    # deeper than its own.
    lines = plan.splitlines()
    start = next(i for i, line in enumerate(lines) if " on corpora_document" in line)
    depth = len(lines[start]) - len(lines[start].lstrip())
    node = [lines[start], *itertools.takewhile(lambda line: len(line) - len(line.lstrip()) > depth, lines[start + 1 :])]
    assert re.search(r"(?:Index Cond|Recheck Cond|Filter): .*\bcorpus_id = \d+", "\n".join(node)), plan
