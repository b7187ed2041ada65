"""Operations screens: the home screen, the operator's dashboard (twin of GET /api/dashboard, polled), the
statistics screen (twin of GET /api/statistics) and the health screen (twin of GET /api/health, signed
in), from the same queries and serializers."""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any
from urllib.parse import urlencode

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_http_methods

from config.charts import Frame, Spacing, Stack, stacked_chart
from config.errors import ServiceError
from config.screens import duration_text, error_page, given, screen_write, validated
from corpora.statuses import OVERVIEW_ORDER
from ops.actions import config_update
from ops.choices import LogLevel
from ops.configuration import assignments, effective_config
from ops.health import health
from ops.queries import dashboard, log_records, log_sources, run_statistics
from ops.serializers import (
    ConfigSerializer,
    DashboardSerializer,
    HealthSerializer,
    LogSourcesSerializer,
    LogsParamsSerializer,
    LogsSerializer,
    PairStatisticsSerializer,
    StatisticsParamsSerializer,
)

# Geometry of a pair's trend chart (SVG user units): one stacked bar per run, standing at 62.
TREND_CHART = Frame(width=240, height=64, top=2, plot=60)
TREND_SPACING = Spacing(inset=0.1, fill=0.8)


def run_progress(run: dict[str, Any]) -> dict[str, Any]:
    """A dashboard row of an open run: the share of its tasks with a result, its rate and ETA in words."""
    tallies, eta = run["tallies"] or {}, run["eta"]
    total = tallies.get("total", 0)
    left = tallies.get("todo", 0) + tallies.get("queued", 0)
    return {
        "run": run,
        "percent": round(100 * (total - left) / total, 1) if total else 100.0,
        "eta": duration_text(eta["eta_seconds"]) if eta["eta_seconds"] is not None else "",
    }


@require_GET
def home_view(request: HttpRequest) -> HttpResponse:
    """The home screen, the operator's dashboard (twin of GET /api/dashboard, whose record includes
    GET /api/status's), refreshing itself every few seconds (?fragment=body)."""
    board = DashboardSerializer(dashboard()).data
    context = {
        "dashboard": board,
        "status": board,
        "latest_duration": duration_text((board["latest_run"] or {}).get("duration_seconds")),
        "runs": [run_progress(run) for run in board["open_runs"]],
    }
    if request.GET.get("fragment") == "body":
        return render(request, "ops/_status_body.html", context)
    return render(request, "ops/home.html", context)


def trend_chart(trend: list[dict[str, Any]]) -> dict[str, Any]:
    """Stacked bars of the runs' per-status tallies, oldest on the left, scaled to the largest total
    (config.charts.stacked_chart)."""
    chart = stacked_chart([Stack.of(point["tallies"], OVERVIEW_ORDER) for point in trend], TREND_CHART, TREND_SPACING)
    bars = [asdict(bar) | {"point": point} for bar, point in zip(chart.bars, trend, strict=True)]
    return {"size": TREND_CHART, "bars": bars}


@require_GET
def statistics_view(request: HttpRequest) -> HttpResponse:
    """Run statistics per pair, each with a small trend chart: twin of GET /api/statistics."""
    try:
        query = validated(StatisticsParamsSerializer(data=given(request.GET)))
        pairs = PairStatisticsSerializer(run_statistics(**query), many=True).data
    except ServiceError as exc:
        return error_page(request, exc)
    rows = [
        {
            "pair": pair,
            "mean": duration_text(pair["mean_duration_seconds"]),
            "last": duration_text(pair["last_duration_seconds"]),
            "chart": trend_chart(pair["trend"]),
        }
        for pair in pairs
    ]
    filters = {"corpus": request.GET.get("corpus", ""), "service": request.GET.get("service", "")}
    return render(
        request, "ops/statistics.html", {"pairs": pairs, "rows": rows, "filters": filters, "statuses": OVERVIEW_ORDER}
    )


# --- detailed health ---
def health_details_shown(details: dict[str, Any]) -> list[dict[str, Any]]:
    """A check's details as the screen shows them: a value with its key (the template reads it for people:
    sizes, durations, yes or no), and a list of records (the pools of the warm engine, the corpus roots) as a
    small table, a row per record and a column per field, each cell with its field's name."""
    shown = []
    for key, value in details.items():
        if isinstance(value, list) and value and all(isinstance(item, dict) for item in value):
            columns = list(dict.fromkeys(field for item in value for field in item))
            rows = [[{"key": column, "value": item.get(column)} for column in columns] for item in value]
            shown.append({"key": key, "columns": columns, "rows": rows})
        else:
            shown.append({"key": key, "value": value})
    return shown


@login_required
def health_view(request: HttpRequest) -> HttpResponse:
    """Screen twin of GET /api/health."""
    data = HealthSerializer(health()).data
    checks = [{"check": check, "details": health_details_shown(check["details"])} for check in data["checks"]]
    context = {"health": data, "checks": checks}
    template = "ops/_health_body.html" if request.GET.get("fragment") == "body" else "ops/health.html"
    return render(request, template, context)


# --- logs ---
LOG_FILTERS = ("level", "process", "logger", "request_id", "limit")


def _with(options: list[str], chosen: str) -> list[str]:
    """A filter's options with the chosen one among them (a link may name one no newer record has)."""
    return options if not chosen or chosen in options else sorted([*options, chosen])


@login_required
@require_GET
def logs_view(request: HttpRequest) -> HttpResponse:
    """Screen twin of GET /api/logs: the same filters (as query parameters, so a filtered view is a link),
    query and serializer; the source filters offer the processes and loggers of the newest records."""
    try:
        query = validated(LogsParamsSerializer(data=given(request.GET)))
        logs = LogsSerializer(log_records(**query)).data
        sources = LogSourcesSerializer(log_sources()).data
    except ServiceError as exc:
        return error_page(request, exc)
    filters = {key: request.GET.get(key, "") for key in LOG_FILTERS} | {"level": query["level"]}
    older = None
    if logs["next_before"]:
        older = urlencode({**{key: value for key, value in filters.items() if value}, "before": logs["next_before"]})
    context = {
        "logs": logs,
        "filters": filters,
        "older": older,
        "levels": LogLevel.values,
        "processes": _with(sources["processes"], filters["process"]),
        "loggers": _with(sources["loggers"], filters["logger"]),
    }
    return render(request, "ops/logs.html", context)


# --- configuration ---
def _not_changed(request: HttpRequest, exc: ServiceError) -> HttpResponse:
    """A refused change: the configuration screen again, with why."""
    messages.error(request, f"Nothing changed: {exc.detail}")
    return redirect("config")


@login_required
@require_http_methods(["GET", "POST"])
def config_view(request: HttpRequest) -> HttpResponse:
    """Screen twin of GET/PUT /api/config: each value, where it comes from and what runs; a settable key is
    set (or reset) one at a time, journaled as the API's changes are (ops.actions.config_update)."""
    if request.method == "POST":
        pair = (request.POST.get("key", ""), request.POST.get("value", ""))
        result, refused = screen_write(
            request,
            lambda: config_update(assignments([pair]), actor=request.user.username),
            form=lambda exc: _not_changed(request, exc),
        )
        if result is None:  # refused: the answer says why
            return refused or redirect("config")
        for key, value in result.after.items():
            messages.success(request, f"{key} = {json.dumps(value)}")
        if result.restart_required:
            messages.warning(request, f"Restart needed for: {', '.join(result.restart_required)}")
        return redirect("config")
    entries = ConfigSerializer(effective_config()).data["entries"]
    rows = [{"entry": entry, "text": json.dumps(entry["value"])} for entry in entries]  # text: what the form sends
    return render(request, "ops/config.html", {"rows": rows})
