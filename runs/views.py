"""Run screens: the run history, a pair's run page, diffs of two snapshots as heat maps with their task
lists, and the comparison of two converters; the same queries, DTOs and input serializers as /api/runs
and /api/compare.

Reads are public like their API twins; taking a snapshot needs a signed-in operator and is journaled.
The retention screen (pruning of old history, admins only) has no API twin: history is append-only
over the API.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any
from urllib.parse import urlencode

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.template.defaultfilters import filesizeformat
from django.urls import reverse
from django.utils.dateparse import parse_datetime
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from config.api.paging import page_check
from config.errors import BadRequest, Forbidden, ServiceError
from config.names import name_check
from config.screens import duration_text, error_page, given, pager, screen_write, validated
from corpora.links import class_tasks_url, document_url, report_url
from corpora.statuses import DIFF_STATUSES, OVERVIEW_ORDER
from corpora.telemetry import BINS_PER_OCTAVE
from runs.actions import diff_read, history_prune, snapshot_append, task_diffs_read
from runs.choices import ClassChange, MemberChange
from runs.queries.classes import (
    class_diff,
    class_diff_count,
    class_known,
    class_split,
    class_tasks,
    document_history,
)
from runs.queries.compare import compare_matrix, compare_scope, compare_tasks
from runs.queries.diffs import DiffScope, diff_scope, task_diff_count
from runs.queries.history import pair_runs, run_current, run_history
from runs.queries.prune import prune_preview
from runs.queries.telemetry import pair_telemetry
from runs.serializers import (
    CUTOFF_HELP,
    ClassChangeSerializer,
    ClassDiffParamsSerializer,
    ClassTaskSerializer,
    ClassTasksParamsSerializer,
    CompareParamsSerializer,
    ComparePickSerializer,
    CompareSerializer,
    CompareTaskSerializer,
    CurrentRunSerializer,
    DiffParamsSerializer,
    DocumentHistorySerializer,
    PairRunsParamsSerializer,
    PruneParamsSerializer,
    PruneSummarySerializer,
    RunDiffSerializer,
    RunListParamsSerializer,
    RunSerializer,
    SnapshotAckSerializer,
    TaskDiffParamsSerializer,
    TaskDiffSerializer,
    TelemetrySerializer,
)

# The run page lists this many regressions; a link leads to all of them.
REGRESSIONS_SHOWN = 50
# The run page and the diff screen list this many new and fixed failure classes; a link leads to all.
FAILURES_SHOWN = 10
FAILURE_SEVERITIES = "error,fatal"
# The tallies chart: one stacked bar per run, oldest on the left; sizes are SVG attributes (CSP).
CHART = {"width": 760, "height": 240, "top": 14, "plot": 186, "axis_y": 200, "label_y": 218, "slot_max": 80}
CHART_LABELS = 8  # at most this many run dates under the bars
HEAT_LEVELS = 5
# The telemetry charts (SVG attributes, CSP): throughput per minute, and a histogram per stage.
THROUGHPUT_CHART = {"width": 760, "height": 160, "top": 14, "plot": 116, "axis_y": 130, "label_y": 148}
STAGE_CHART = {"width": 360, "height": 130, "top": 12, "plot": 90, "axis_y": 102, "label_y": 120}


# --- shared pieces -----------------------------------------------------------------------------------


def crumbs(corpus: str, service: str, *tail: tuple[str, str | None]) -> list[dict[str, str | None]]:
    """Corpora > corpus > service (its report) > runs > ..., each level linked but the last."""
    trail: list[dict[str, str | None]] = [
        {"label": "Corpora", "href": reverse("corpora")},
        {"label": corpus, "href": reverse("corpus", kwargs={"name": corpus})},
        {"label": service, "href": report_url(corpus, service)},
        {"label": "runs", "href": reverse("runs-pair", kwargs={"corpus": corpus, "service": service})},
        *({"label": label, "href": href} for label, href in tail),
    ]
    trail[-1]["href"] = None
    return trail


def run_rows(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each run DTO with the link to its pair's run page and its duration in words."""
    return [
        {
            "run": run,
            "href": reverse("runs-pair", kwargs={"corpus": run["corpus"], "service": run["service"]}),
            "duration": duration_text(run["duration_seconds"]),
        }
        for run in runs
    ]


def run_chart(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Geometry of the tallies chart: per run (oldest first) a stack of its per-status counts, bars
    scaled to the largest total."""
    shown = [run for run in reversed(runs) if run["tallies"]]
    slot = min(CHART["width"] / max(len(shown), 1), CHART["slot_max"])
    peak = max((run["tallies"]["total"] for run in shown), default=0) or 1
    every = math.ceil(len(shown) / CHART_LABELS) or 1
    bars = []
    for index, run in enumerate(shown):
        top, segments = CHART["top"] + CHART["plot"], []
        for key in OVERVIEW_ORDER:  # no_problem at the bottom
            count = run["tallies"][key]
            if count:
                height = CHART["plot"] * count / peak
                top -= height
                segments.append({"key": key, "count": count, "y": round(top, 2), "height": round(height, 2)})
        bars.append(
            {
                "run": run,
                "x": round(index * slot + slot * 0.15, 2),
                "width": round(slot * 0.7, 2),
                "center": round(index * slot + slot / 2, 2),
                "segments": segments,
                "label": run["started_at"][5:16].replace("T", " ") if index % every == 0 else "",
            }
        )
    return {"size": CHART, "bars": bars, "peak": peak, "statuses": OVERVIEW_ORDER}


def throughput_chart(minutes: list[dict[str, Any]]) -> dict[str, Any]:
    """Geometry of the throughput chart: a bar per minute of the open run from its first minute with a
    result to its last (minutes with none stay empty), scaled to the busiest minute."""
    size = THROUGHPUT_CHART
    if not minutes:
        return {"size": size, "bars": [], "peak": 0}
    stamps = [parse_datetime(point["minute"]) for point in minutes]
    first = stamps[0]
    span = round((stamps[-1] - first).total_seconds() / 60) + 1
    slot = size["width"] / span
    peak = max(point["completed"] for point in minutes) or 1
    every = math.ceil(span / CHART_LABELS) or 1
    bars = []
    for point, stamp in zip(minutes, stamps, strict=True):
        index = round((stamp - first).total_seconds() / 60)
        height = size["plot"] * point["completed"] / peak
        bars.append(
            {
                "point": point,
                "x": round(index * slot + slot * 0.1, 2),
                "width": round(max(slot * 0.8, 0.5), 2),
                "y": round(size["axis_y"] - height, 2),
                "height": round(height, 2),
                "label": point["minute"][11:16] if index % every == 0 else "",
                "center": round(index * slot + slot / 2, 2),
            }
        )
    return {"size": size, "bars": bars, "peak": peak}


def stage_charts(stages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Geometry of each stage's histogram: a slot per log-scale bin from the shortest non-empty one to
    the longest, so that the x axis stays logarithmic; bars scaled to the fullest bin."""
    size = STAGE_CHART
    charts = []
    for stage in stages:
        histogram, bars = stage["histogram"], []
        if histogram:
            # A bin's upper bound is 2^((b + 1) / 4) ms (corpora.telemetry.bin_bounds).
            indices = [round(math.log2(row["to_ms"]) * BINS_PER_OCTAVE) - 1 for row in histogram]
            slot = size["width"] / (indices[-1] - indices[0] + 1)
            peak = max(row["count"] for row in histogram)
            for row, index in zip(histogram, indices, strict=True):
                height = size["plot"] * row["count"] / peak
                offset = (index - indices[0]) * slot
                bars.append(
                    {
                        "row": row,
                        "x": round(offset + slot * 0.1, 2),
                        "width": round(slot * 0.8, 2),
                        "y": round(size["axis_y"] - height, 2),
                        "height": round(height, 2),
                    }
                )
        charts.append({"stage": stage, "size": size, "bars": bars, "title": stage["stage"].replace("_", " ")})
    return charts


def heat_level(count: int, peak: int) -> int:
    """0 for an empty cell, else 1..HEAT_LEVELS on a log scale up to the largest changed cell."""
    if count == 0:
        return 0
    if peak <= 1:
        return HEAT_LEVELS
    return 1 + round((HEAT_LEVELS - 1) * math.log(count) / math.log(peak))


def heat_map(
    cells: list[dict[str, Any]], row_key: str, column_key: str, href: Callable[[str, str], str]
) -> dict[str, Any]:
    """A matrix DTO as a square table over the statuses it holds. The diagonal (unchanged) is shaded
    apart; every other non-empty cell is shaded by its count, links to `href(row, column)` and is marked
    when it is a regression."""
    by_pair = {(cell[row_key], cell[column_key]): cell for cell in cells}
    present = {cell[row_key] for cell in cells} | {cell[column_key] for cell in cells}
    statuses = [status for status in DIFF_STATUSES if status in present]
    peak = max((cell["count"] for cell in cells if cell[row_key] != cell[column_key]), default=0)
    rows = []
    for row in statuses:
        line = []
        for column in statuses:
            cell = by_pair.get((row, column))
            count, same = (cell["count"] if cell else 0), row == column
            line.append(
                {
                    "row": row,
                    "column": column,
                    "count": count,
                    "same": same,
                    "level": heat_level(count, peak),
                    "regression": bool(cell and cell["regression"]),
                    "href": href(row, column) if count and not same else None,
                }
            )
        rows.append({"status": row, "cells": line})
    return {"statuses": statuses, "rows": rows}


def _query(**params: Any) -> str:
    return "?" + urlencode({key: value for key, value in params.items() if value not in (None, "")})


def tasks_href(corpus: str, service: str, diff: dict[str, Any], **filters: str | None) -> str:
    """The task list of a diff's two snapshots, optionally of one transition or only its regressions."""
    path = reverse("runs-tasks", kwargs={"corpus": corpus, "service": service})
    return path + _query(previous=diff["previous"], current=diff["current"], **filters)


def diff_heat_map(diff: dict[str, Any]) -> dict[str, Any]:
    corpus, service = diff["corpus"], diff["service"]
    return heat_map(
        diff["matrix"], "previous", "current",
        lambda p, c: tasks_href(corpus, service, diff, previous_status=p, current_status=c),
    )  # fmt: skip


def task_rows(corpus: str, service: str, tasks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"task": task, "href": document_url(corpus, service, task["document"])} for task in tasks]


# --- history -----------------------------------------------------------------------------------------


@require_GET
def run_list_view(request: HttpRequest) -> HttpResponse:
    """Screen twin of GET /api/runs: every run, newest first, filtered by corpus, service or owner."""
    try:
        query = validated(RunListParamsSerializer(data=given(request.GET)))
        runs = RunSerializer(run_history(**query), many=True).data
    except ServiceError as exc:
        return error_page(request, exc)
    filters = {key: request.GET.get(key, "") for key in ("corpus", "service", "owner", "limit")}
    return render(request, "runs/list.html", {"runs": runs, "rows": run_rows(runs), "filters": filters})


@require_GET
def pair_view(request: HttpRequest, corpus: str, service: str) -> HttpResponse:
    """The run page of a pair: twin of GET /api/runs/<c>/<s> (history), .../current (the open run and its
    ETA), .../telemetry (throughput and stage times),
    .../diff (the two latest snapshots) and .../tasks?change=regressed (what got worse)."""
    try:
        query = validated(PairRunsParamsSerializer(data=given(request.GET)))
        runs = RunSerializer(pair_runs(corpus, service, **query), many=True).data
        current = run_current(corpus, service)
        telemetry = TelemetrySerializer(pair_telemetry(corpus, service)).data
        scope = diff_scope(corpus, service)
        _, record = diff_read(scope)
        diff = RunDiffSerializer(record).data
        page = page_check(0, REGRESSIONS_SHOWN)
        regressions = TaskDiffSerializer(task_diffs_read(scope, page, change="regressed"), many=True).data
    except ServiceError as exc:
        return error_page(request, exc)
    dates = diff["available_dates"]
    context = {
        "corpus": corpus,
        "service": service,
        "runs": runs,
        "current": CurrentRunSerializer(current).data if current else None,
        "telemetry": telemetry,
        "telemetry_runs": [("open run", telemetry["open_run"]), ("closed run", telemetry["last_closed_run"])],
        "throughput": throughput_chart(telemetry["throughput"]),
        "stage_charts": stage_charts((telemetry["open_run"] or telemetry["last_closed_run"] or {}).get("stages", [])),
        "eta_text": duration_text((telemetry["eta"] or {}).get("eta_seconds")),
        "diff": diff,
        "regressions": regressions,
        "rows": run_rows(runs),
        "chart": run_chart(runs),
        "heat": diff_heat_map(diff),
        "regression_rows": task_rows(corpus, service, regressions),
        "all_regressions": tasks_href(corpus, service, diff, change="regressed"),
        # Each snapshot but the oldest links to its diff with the one before it.
        "snapshots": [
            {"date": date, "href": _diff_href(corpus, service, dates[i + 1], date) if i + 1 < len(dates) else None}
            for i, date in enumerate(dates)
        ],
        "failures": top_failures(corpus, service, scope),
        "crumbs": crumbs(corpus, service),
    }
    return render(request, "runs/pair.html", context)


def _diff_href(corpus: str, service: str, previous: str, current: str) -> str:
    path = reverse("runs-diff", kwargs={"corpus": corpus, "service": service})
    return path + _query(previous=previous, current=current)


@login_required
@require_POST
def snapshot_view(request: HttpRequest, corpus: str, service: str) -> HttpResponse:
    """Screen twin of POST /api/corpora/<c>/services/<s>/snapshot: the pair's statuses as one snapshot."""
    done, refused = screen_write(
        request, lambda: snapshot_append(corpus_name=corpus, service_name=service, actor=request.user.username)
    )
    if refused:
        return refused
    ack = SnapshotAckSerializer(done).data
    messages.success(request, f"Snapshot of {ack['rows']} tasks taken at {ack['taken_at'][:19].replace('T', ' ')}.")
    return redirect("runs-pair", corpus=corpus, service=service)


# --- diffs -------------------------------------------------------------------------------------------


@require_GET
def diff_view(request: HttpRequest, corpus: str, service: str) -> HttpResponse:
    """Screen twin of GET /api/runs/<c>/<s>/diff: two snapshot dates to pick and their matrix as a heat
    map whose cells lead to their documents."""
    try:
        query = validated(DiffParamsSerializer(data=given(request.GET)))
        scope = diff_scope(corpus, service, **query)
        _, record = diff_read(scope)
        diff = RunDiffSerializer(record).data
    except ServiceError as exc:
        return error_page(request, exc)
    context = {
        "diff": diff,
        "failures": top_failures(corpus, service, scope),
        "heat": diff_heat_map(diff),
        "all_changes": tasks_href(corpus, service, diff),
        "regressions_href": tasks_href(corpus, service, diff, change="regressed"),
        "crumbs": crumbs(corpus, service, ("diff", None)),
    }
    return render(request, "runs/diff.html", context)


@require_GET
def tasks_view(request: HttpRequest, corpus: str, service: str) -> HttpResponse:
    """Screen twin of GET /api/runs/<c>/<s>/tasks: the documents whose status changed between two
    snapshots, optionally of one transition, each linked to its document screen."""
    try:
        query = dict(validated(TaskDiffParamsSerializer(data=given(request.GET))))
        page = page_check(query.pop("offset", None), query.pop("page_size", None))
        scope = diff_scope(corpus, service, query.pop("previous", None), query.pop("current", None))
        diff_id, record = diff_read(scope)
        diff = RunDiffSerializer(record).data
        tasks = TaskDiffSerializer(task_diffs_read(scope, page, **query), many=True).data
        count = task_diff_count(diff_id, **query)
    except ServiceError as exc:
        return error_page(request, exc)
    # Pages stay on the same two snapshots, whatever is taken meanwhile.
    kept = {"previous": diff["previous"], "current": diff["current"], **query}
    context = {
        "diff": diff,
        "tasks": tasks,
        "filters": query,
        "rows": task_rows(corpus, service, tasks),
        "count": count,
        "diff_href": _diff_href(corpus, service, diff["previous"], diff["current"]) if diff["previous"] else None,
        "pager": pager(page.offset, page.page_size, len(tasks), count, {k: v for k, v in kept.items() if v}),
        "crumbs": crumbs(corpus, service, ("diff", _diff_href(corpus, service, diff["previous"], diff["current"])),
                         ("documents", None)),
    }  # fmt: skip
    return render(request, "runs/tasks.html", context)


# --- message classes between two snapshots, and a document's history --------------------------------


def classes_href(corpus: str, service: str, scope: DiffScope, **filters: str | None) -> str:
    """The class diff screen of two snapshots, optionally filtered."""
    path = reverse("runs-classes", kwargs={"corpus": corpus, "service": service})
    return path + _query(**_dates(scope), **filters)


def class_tasks_href(corpus: str, service: str, dates: dict[str, str], change: dict[str, Any], which: str) -> str:
    """The documents that gained or lost the class of a class change, between the same two snapshots."""
    path = class_tasks_url(corpus, service, change["severity"], change["category"], change["what"])
    return path + _query(**dates, change=which)


def _dates(scope: DiffScope) -> dict[str, str]:
    if scope.previous is None or scope.current is None:
        return {}
    return {"previous": scope.previous.taken_at.isoformat(), "current": scope.current.taken_at.isoformat()}


def class_rows(corpus: str, service: str, scope: DiffScope, changes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each class change with links to the documents that gained and that lost it (when listed)."""
    dates = _dates(scope)
    return [
        {
            "change": change,
            "gained_href": class_tasks_href(corpus, service, dates, change, MemberChange.GAINED)
            if change["documents_listed"] and change["current_tasks"] else None,
            "lost_href": class_tasks_href(corpus, service, dates, change, MemberChange.LOST)
            if change["documents_listed"] and change["previous_tasks"] else None,
        }
        for change in changes
    ]  # fmt: skip


def top_failures(corpus: str, service: str, scope: DiffScope) -> dict[str, Any]:
    """The error and fatal classes that most tasks gained (new failures) and lost (fixed failures) between
    two snapshots, for the run page and the diff screen; a note instead when the snapshots cannot say."""
    if scope.previous is None or scope.current is None:
        return {"note": "Two snapshots are needed to compare their message classes."}
    page = page_check(0, FAILURES_SHOWN)
    try:
        new = ClassChangeSerializer(
            class_diff(scope, page, kind=ClassChange.INCREASED, severity=FAILURE_SEVERITIES), many=True
        ).data
        fixed = ClassChangeSerializer(
            class_diff(scope, page, kind=ClassChange.DECREASED, severity=FAILURE_SEVERITIES), many=True
        ).data
    except BadRequest as exc:
        return {"note": str(exc.detail)}
    return {
        "new": class_rows(corpus, service, scope, new),
        "fixed": class_rows(corpus, service, scope, fixed),
        "new_href": classes_href(corpus, service, scope, kind=ClassChange.INCREASED, severity=FAILURE_SEVERITIES),
        "fixed_href": classes_href(corpus, service, scope, kind=ClassChange.DECREASED, severity=FAILURE_SEVERITIES),
        "all_href": classes_href(corpus, service, scope),
    }


@require_GET
def classes_view(request: HttpRequest, corpus: str, service: str) -> HttpResponse:
    """Screen twin of GET /api/runs/<c>/<s>/classes: the message classes whose task count changed between
    two snapshots, the largest change first, each linked to the documents that gained or lost it."""
    try:
        query = dict(validated(ClassDiffParamsSerializer(data=given(request.GET))))
        page = page_check(query.pop("offset", None), query.pop("page_size", None))
        scope = diff_scope(corpus, service, query.pop("previous", None), query.pop("current", None))
        changes = ClassChangeSerializer(class_diff(scope, page, **query), many=True).data
        count = class_diff_count(scope, **query)
    except ServiceError as exc:
        return error_page(request, exc)
    kept = {**_dates(scope), **query}
    context = {
        "scope": _dates(scope),
        "filters": query,
        "kinds": ClassChange.values,
        "rows": class_rows(corpus, service, scope, changes),
        "count": count,
        "pager": pager(page.offset, page.page_size, len(changes), count, {k: v for k, v in kept.items() if v}),
        "crumbs": crumbs(corpus, service, ("diff", _scope_diff_href(corpus, service, scope)), ("classes", None)),
    }
    return render(request, "runs/classes.html", context)


def _scope_diff_href(corpus: str, service: str, scope: DiffScope) -> str | None:
    dates = _dates(scope)
    return _diff_href(corpus, service, dates["previous"], dates["current"]) if dates else None


@require_GET
def class_tasks_view(request: HttpRequest, corpus: str, service: str, severity: str, rest: str) -> HttpResponse:
    """Screen twin of GET /api/runs/<c>/<s>/classes/<severity>/<category>/<what>/tasks: the documents that
    gained or lost a class between two snapshots, each linked to its document screen and its history."""
    try:
        query = dict(validated(ClassTasksParamsSerializer(data=given(request.GET))))
        page = page_check(query.pop("offset", None), query.pop("page_size", None))
        scope = diff_scope(corpus, service, query.pop("previous", None), query.pop("current", None))
        cls = class_known(severity, *class_split(severity, rest))
        tasks = ClassTaskSerializer(class_tasks(scope, cls, query["change"], page), many=True).data
    except ServiceError as exc:
        return error_page(request, exc)
    kept = {**_dates(scope), "change": query["change"]}
    context = {
        "scope": _dates(scope),
        "cls": cls,
        "change": query["change"],
        "other_href": class_tasks_href(
            corpus, service, _dates(scope), {"severity": cls.severity, "category": cls.category, "what": cls.what},
            MemberChange.LOST if query["change"] == MemberChange.GAINED else MemberChange.GAINED,
        ),
        "tasks": tasks,
        # The count of a class's gained or lost documents is not kept: the pager knows only whether the page is full.
        "pager": pager(page.offset, page.page_size, len(tasks), None, kept),
        "crumbs": crumbs(corpus, service, ("diff", _scope_diff_href(corpus, service, scope)),
                         ("classes", classes_href(corpus, service, scope)), (f"{cls.category}: {cls.what}", None)),
    }  # fmt: skip
    return render(request, "runs/class_tasks.html", context)


@require_GET
def document_history_view(request: HttpRequest, corpus: str, service: str, name: str) -> HttpResponse:
    """Screen twin of GET /api/corpus/<c>/<s>/document/<name>/history: the document's status over time as a
    strip, and a table of its snapshots with the classes it had in each."""
    try:
        history = DocumentHistorySerializer(document_history(corpus, service, name)).data
    except ServiceError as exc:
        return error_page(request, exc)
    context = {
        "history": history,
        "strip": history_strip(history["entries"]),
        "crumbs": crumbs(corpus, service, (name, history["report_url"]), ("history", None)),
    }
    return render(request, "runs/history.html", context)


# The status strip of a document's history: one cell per entry, oldest on the left; sizes are SVG attributes.
STRIP = {"width": 760, "height": 56, "cell_max": 60, "bar": 28, "label_y": 48}


def history_strip(entries: list[dict[str, Any]]) -> dict[str, Any]:
    """Geometry of the status strip: a cell per snapshot (and the live state), oldest first, coloured by
    the status then."""
    shown = list(reversed(entries))
    cell = min(STRIP["width"] / max(len(shown), 1), STRIP["cell_max"])
    every = math.ceil(len(shown) / CHART_LABELS) or 1
    cells = [
        {
            "x": round(index * cell, 2),
            "width": round(cell - 2, 2),
            "center": round(index * cell + cell / 2, 2),
            "status": entry["status"],
            "title": f"{'now' if entry['live'] else entry['taken_at'][:19].replace('T', ' ')}: {entry['status']}",
            "label": ("now" if entry["live"] else entry["taken_at"][5:10]) if index % every == 0 else "",
        }
        for index, entry in enumerate(shown)
    ]
    return {"size": STRIP, "cells": cells}


# --- converter comparison ----------------------------------------------------------------------------


def compare_crumbs(corpus: str, a: str, b: str, *tail: tuple[str, str | None]) -> list[dict[str, str | None]]:
    trail: list[dict[str, str | None]] = [
        {"label": "Corpora", "href": reverse("corpora")},
        {"label": corpus, "href": reverse("corpus", kwargs={"name": corpus})},
        {"label": f"{a} vs {b}", "href": _compare_url(corpus, a, b)},
        *({"label": label, "href": href} for label, href in tail),
    ]
    trail[-1]["href"] = None
    return trail


def _compare_url(corpus: str, a: str, b: str, suffix: str = "") -> str:
    return reverse(f"runs-compare{suffix}", kwargs={"corpus": corpus, "service_a": a, "service_b": b})


@require_GET
def compare_pick_view(request: HttpRequest, corpus: str) -> HttpResponse:
    """The corpus page's form: two of its services, sent on to their comparison."""
    try:
        picked = validated(ComparePickSerializer(data=request.GET))
        a = name_check(picked["service_a"], field="service_a")
        b = name_check(picked["service_b"], field="service_b")
    except ServiceError as exc:
        return error_page(request, exc)
    return redirect(_compare_url(corpus, a, b))


@require_GET
def compare_view(request: HttpRequest, corpus: str, service_a: str, service_b: str) -> HttpResponse:
    """Screen twin of GET /api/compare/<c>/<a>/<b>: A's status x B's status as a heat map whose cells
    lead to the documents on which they differ that way."""
    try:
        compare = CompareSerializer(compare_matrix(compare_scope(corpus, service_a, service_b))).data
    except ServiceError as exc:
        return error_page(request, exc)
    tasks = _compare_url(corpus, service_a, service_b, "-tasks")
    context = {
        "compare": compare,
        "sides": [compare["profile_a"], compare["profile_b"]],
        "heat": heat_map(compare["matrix"], "status_a", "status_b",
                         lambda a, b: tasks + _query(status_a=a, status_b=b)),
        "all_differences": tasks,
        "regressions_href": tasks + _query(change="regressed"),
        "swapped": _compare_url(corpus, service_b, service_a),
        "crumbs": compare_crumbs(corpus, service_a, service_b),
    }  # fmt: skip
    return render(request, "runs/compare.html", context)


@require_GET
def compare_tasks_view(request: HttpRequest, corpus: str, service_a: str, service_b: str) -> HttpResponse:
    """Screen twin of GET /api/compare/<c>/<a>/<b>/tasks: the documents on which A and B differ, each
    linked to both document screens."""
    try:
        query = dict(validated(CompareParamsSerializer(data=given(request.GET))))
        page = page_check(query.pop("offset", None), query.pop("page_size", None))
        tasks = CompareTaskSerializer(
            compare_tasks(compare_scope(corpus, service_a, service_b), page, **query), many=True
        ).data
    except ServiceError as exc:
        return error_page(request, exc)
    rows = [
        {"task": task, "href_a": document_url(corpus, service_a, task["document"]),
         "href_b": document_url(corpus, service_b, task["document"])}
        for task in tasks
    ]  # fmt: skip
    context = {
        "corpus": corpus,
        "service_a": service_a,
        "service_b": service_b,
        "tasks": tasks,
        "filters": query,
        "rows": rows,
        # Counting the differences is the matrix's full join: the pager goes on until a short page.
        "pager": pager(page.offset, page.page_size, len(tasks), None, {k: v for k, v in query.items() if v}),
        "crumbs": compare_crumbs(corpus, service_a, service_b, ("documents", None)),
    }
    return render(request, "runs/compare_tasks.html", context)


# --- retention: pruning of run history (admins only; deliberately without an API twin) ----------


@login_required
@require_http_methods(["GET", "POST"])
def retention_view(request: HttpRequest) -> HttpResponse:
    """GET ?before=DATE[&corpus=&service=] previews what a prune removes; POST with the same fields and
    the cutoff typed again as `confirm` prunes (runs.actions.history_prune, journaled)."""
    if not request.user.is_staff:
        return error_page(request, Forbidden("Pruning run history is for admins (create_token ACTOR --staff)."))
    data = request.POST if request.method == "POST" else request.GET
    form = {key: data.get(key, "") for key in ("before", "corpus", "service")}
    context: dict[str, Any] = {"form": form, "summary": None, "error": "", "cutoff_help": CUTOFF_HELP}
    if request.method == "GET" and not form["before"]:
        return render(request, "runs/retention.html", context)
    try:
        params = validated(PruneParamsSerializer(data=form))
        if request.method == "POST":
            if data.get("confirm", "").strip() != form["before"].strip():
                context["summary"] = PruneSummarySerializer(prune_preview(**params)).data
                raise BadRequest(f"Type the cutoff {form['before']} into the confirmation field to prune.")
            total = history_prune(**params, actor=request.user.username)["total"]
            messages.success(request, _removed_sentence(total))
            return redirect(reverse("runs-retention") + "?" + urlencode(form))
        context["summary"] = PruneSummarySerializer(prune_preview(**params)).data
    except ServiceError as exc:
        field_errors = [str(error) for errors in (exc.errors or {}).values() for error in errors]
        context["error"] = " ".join(field_errors) or exc.detail
        return render(request, "runs/retention.html", context, status=exc.status)
    return render(request, "runs/retention.html", context)


def _removed_sentence(total: dict[str, int]) -> str:
    return (
        f"Pruned {total['runs']} runs, {total['snapshots']} snapshots and {total['diffs']} diffs"
        f" ({total['diff_rows']} diff rows), freeing {filesizeformat(total['bytes'])} for reuse."
    )
