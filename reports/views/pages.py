"""Report screens: the same queries, DTOs and input serializers as /api/reports, the same actions.

Reads are public like their API twins, except the runtime screen (its API needs a token); every write
needs a signed-in operator. Every link is built by reports.links.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any
from urllib.parse import urlencode

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.template.defaultfilters import pluralize
from django.urls import reverse
from django.utils.html import format_html
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_GET, require_POST

from config.api.paging import Page, PageParamsSerializer, page_check
from config.errors import ServiceError
from config.names import NAME_MAX, name_is_valid
from config.screens import HTMX_STOP_POLLING, error_page, given, pager, screen_write, validated
from conversion.choices import SEVERITIES_WORST_FIRST, Category, Severity
from corpora.actions.reports import category_report_read, pair_refresh, rerun, run_control, what_report_read
from corpora.choices import ExportGrouping, RunControlAction
from corpora.export.queries import EXPORT_SEVERITIES
from corpora.queries.compare import comparable_services
from corpora.queries.corpora import pair_resolve
from corpora.queries.reports import (
    document_report,
    entry_list,
    report_path_split,
    runtime_report,
    service_overview,
)
from corpora.statuses import OVERVIEW_ORDER, SEVERITIES
from reports import serializers
from reports.charts import RUNTIME_CHART, histogram_axis, histogram_bars
from reports.links import (
    document_history_url,
    document_reader_url,
    document_url,
    is_report_url,
    messages_export_url,
    report_url,
    run_url,
)
from services.choices import ProtectedService

# --- links, crumbs, pages ----------------------------------------------------------------------------

RERUN_FIELDS = ("severity", "category", "what", "description")


def crumbs(
    corpus: str,
    service: str,
    severity: str | None = None,
    category: str | None = None,
    what: str | None = None,
    document: str | None = None,
) -> list[dict[str, str | None]]:
    """corpus > service > severity > category > what > document, each level linked but the last."""
    trail: list[dict[str, str | None]] = [
        {"label": "Corpora", "href": reverse("corpora")},
        {"label": corpus, "href": reverse("corpus", kwargs={"name": corpus})},
        {"label": service, "href": report_url(corpus, service)},
    ]
    levels = [severity, category, what]
    for depth, label in enumerate(levels):
        if label is not None:
            trail.append({"label": label, "href": report_url(corpus, service, *levels[: depth + 1])})
    if document is not None:
        trail.append({"label": document, "href": None})
    trail[-1]["href"] = None
    return trail


def export_links(
    corpus: str, service: str, severity: str | None = None, category: str | None = None, what: str | None = None
) -> list[dict[str, str]]:
    """The downloads of a report level's messages, one per format of the export."""
    return [
        {"format": name, "href": messages_export_url(corpus, service, severity, category, what, format_name=name)}
        for name in serializers.EXPORT_FORMATS
    ]


def page_params(request: HttpRequest) -> Page:
    """offset and page_size from the query string, checked as the API checks them."""
    params = validated(PageParamsSerializer(data=request.GET))
    return page_check(params.get("offset"), params.get("page_size"))


def _fragment(request: HttpRequest, template: str, context: dict[str, Any], *, live: bool) -> HttpResponse:
    """A polled part of a page; once nothing moves it answers 286, which ends htmx's polling."""
    response = render(request, template, context)
    if not live:
        response.status_code = HTMX_STOP_POLLING
    return response


# --- overview ----------------------------------------------------------------------------------------


def _overview_page(
    request: HttpRequest, corpus: str, service: str, *, error: ServiceError | None = None
) -> HttpResponse:
    try:
        pair = pair_resolve(corpus, service)
        overview = serializers.ServiceOverviewSerializer(service_overview(pair)).data
    except ServiceError as exc:
        return error_page(request, exc)
    live = overview["run_in_progress"] or overview["counts"]["in_progress"] > 0
    statuses = [
        {
            "key": key,
            "count": overview["counts"][key],
            "percent": overview["percentages"].get(key),
            "href": report_url(corpus, service, key) if key in overview["severities"] else None,
        }
        for key in OVERVIEW_ORDER
    ]
    context = {
        "overview": overview, "live": live, "statuses": statuses,
        "converter_fatal": overview["counts"]["fatal"] - overview["infrastructure_fatal"],
        "infrastructure_href": report_url(corpus, service, "fatal", Category.INFRASTRUCTURE),
    }  # fmt: skip
    if request.GET.get("fragment") == "body":
        return _fragment(request, "reports/_overview_body.html", context, live=live)
    context.update(
        crumbs=crumbs(corpus, service),
        # Infrastructure services (import) have no runs and are no converters to compare.
        converter=service not in ProtectedService.values,
        compare_with=comparable_services(pair) if service not in ProtectedService.values else [],
        info_href=report_url(corpus, service, Severity.INFO),
        export_links=export_links(corpus, service),
        error=error.detail if error else "",
        export_group_bys=ExportGrouping.values,
        export_severities=list(EXPORT_SEVERITIES),
    )
    return render(request, "reports/overview.html", context, status=error.status if error else 200)


@require_GET
def overview_view(request: HttpRequest, corpus: str, service: str) -> HttpResponse:
    """Screen twin of GET /api/reports/<corpus>/<service>; its counts poll while a run is in progress."""
    return _overview_page(request, corpus, service)


# --- severity > category > what > entries ------------------------------------------------------------


def _grain_page(request: HttpRequest, report: dict[str, Any], rerun_label: str) -> HttpResponse:
    """A category report, or a what report when `report` has a category; polls while computing."""
    corpus, service, severity = report["corpus"], report["service"], report["severity"]
    category = report.get("category")
    # A row of a category report names a category; of a what report, a what within `category`.
    levels = (lambda name: (name,)) if category is None else (lambda name: (category, name))
    context = {
        "report": report,
        "rows": [
            {"row": row, "href": report_url(corpus, service, severity, *levels(row["name"]))} for row in report["rows"]
        ],
        "pager": pager(report["offset"], report["page_size"], len(report["rows"]), report["count"]),
        "rerun_label": rerun_label,
        "every_completed": severity == Severity.INFO,  # the info page covers every completed task
    }
    if request.GET.get("fragment") == "body":
        return _fragment(request, "reports/_grain_body.html", context, live=report["computing"])
    context["crumbs"] = crumbs(corpus, service, severity, category)
    context["sandbox"] = sandbox_form(corpus, service, severity, category)
    context["export_links"] = export_links(corpus, service, severity, category)
    return render(request, "reports/grain.html", context)


@require_GET
def category_view(request: HttpRequest, corpus: str, service: str, severity: str) -> HttpResponse:
    """Screen twin of GET /api/reports/<corpus>/<service>/<severity>: one row per category."""
    try:
        page = page_params(request)
        report = serializers.GrainReportSerializer(
            category_report_read(pair_resolve(corpus, service), severity, page)
        ).data
    except ServiceError as exc:
        return error_page(request, exc)
    return _grain_page(request, report, f"every {severity} task")


@require_GET
def drill_view(request: HttpRequest, corpus: str, service: str, severity: str, rest: str) -> HttpResponse:
    """Screen twin of GET /api/reports/<c>/<s>/<severity>/<rest>: the what report of a category, or the
    entry list of a (category, what); both may hold '/', so the data decides the split, as in the API."""
    try:
        pair = pair_resolve(corpus, service)
        category, what = report_path_split(pair, severity, rest)
        page = page_params(request)
        if what is None:
            report = serializers.GrainReportSerializer(what_report_read(pair, severity, category, page)).data
            return _grain_page(request, report, "these tasks")
        entries = serializers.EntryListSerializer(entry_list(pair, severity, category, what, page)).data
    except ServiceError as exc:
        return error_page(request, exc)
    # The document screen shows how the operator got there: the trail only feeds its crumbs.
    trail = "?" + urlencode({"severity": severity, "category": category, "what": what})
    rows = [
        {
            "entry": entry,
            "href": document_url(corpus, service, entry["document"]) + trail,
            "first_line": entry["details"].split("\n", 1)[0],
        }
        for entry in entries["entries"]
    ]
    context = {
        "entries": entries,
        "rows": rows,
        "crumbs": crumbs(corpus, service, severity, category, what),
        "pager": pager(entries["offset"], entries["page_size"], len(entries["entries"]), None),
        "rerun_label": "these tasks",
        "sandbox": sandbox_form(corpus, service, severity, category, what),
        "export_links": export_links(corpus, service, severity, category, what),
    }
    return render(request, "reports/entries.html", context)


# --- document ----------------------------------------------------------------------------------------


def _document_trail(query: Any, corpus: str, service: str, document: str) -> list[dict[str, str | None]]:
    """Crumbs through the severity, category and what the operator came from, when the link said so."""
    severity = query.get("severity")
    if severity not in SEVERITIES:
        return crumbs(corpus, service, document=document)
    category = query.get("category") or None
    what = (query.get("what") or None) if category else None
    return crumbs(corpus, service, severity, category, what, document)


@require_GET
def document_view(request: HttpRequest, corpus: str, service: str, name: str) -> HttpResponse:
    """Screen twin of GET /api/corpus/<c>/<s>/document/<name>: status, messages, result and preview."""
    try:
        document = serializers.DocumentReportSerializer(document_report(pair_resolve(corpus, service), name)).data
    except ServiceError as exc:
        return error_page(request, exc)
    groups = [
        {
            "severity": severity,
            "messages": [m for m in document["messages"] if m["severity"] == severity],
            "folded": severity == Severity.INFO,
        }
        for severity in SEVERITIES_WORST_FIRST
    ]
    names = (document["corpus"], document["service"], document["document"])
    context = {
        "document": document,
        "groups": groups,
        "history_url": document_history_url(*names),
        "reader_href": document_reader_url(*names) if document["has_html"] else None,
        "crumbs": _document_trail(request.GET, corpus, service, document["document"]),
    }
    return render(request, "reports/document.html", context)


# --- runtimes ----------------------------------------------------------------------------------------


@login_required
@require_GET
def runtime_view(request: HttpRequest, service: str) -> HttpResponse:
    """Screen twin of GET /api/services/<service>/runtimes: distribution, histogram, slowest conversions."""
    try:
        report = serializers.RuntimeReportSerializer(runtime_report(service, page_params(request))).data
    except ServiceError as exc:
        return error_page(request, exc)
    slowest = [
        {"conversion": row, "href": document_url(row["corpus"], report["service"], row["document"])}
        for row in report["slowest"]
    ]
    context = {
        "report": report,
        "slowest": slowest,
        "bars": histogram_bars(report["histogram"]),
        "axis": histogram_axis(report["histogram"]),
        "chart": RUNTIME_CHART,
        "pager": pager(report["offset"], report["page_size"], len(report["slowest"]), report["count"]),
    }
    return render(request, "reports/runtimes.html", context)


# --- writes ------------------------------------------------------------------------------------------


def _back(request: HttpRequest, corpus: str, service: str) -> str:
    """The report page the form was on, or the overview; never another site."""
    target = request.POST.get("next", "")
    local = url_has_allowed_host_and_scheme(target, allowed_hosts={request.get_host()})
    return target if local and is_report_url(target) else report_url(corpus, service)


@login_required
@require_POST
def rerun_view(request: HttpRequest, corpus: str, service: str) -> HttpResponse:
    """Screen twin of POST /api/reports/<c>/<s>/rerun: the scope comes in hidden fields."""
    fields = given(request.POST, RERUN_FIELDS)
    done, refused = screen_write(
        request,
        lambda: rerun(
            corpus_name=corpus, service_name=service, actor=request.user.username,
            submitted=serializers.RerunParamsSerializer(data=fields),
        ),
        form=lambda exc: _overview_page(request, corpus, service, error=exc),
    )  # fmt: skip
    if refused:
        return refused
    ack = serializers.RerunAckSerializer(done).data
    tasks = f"{ack['tasks']} task{pluralize(ack['tasks'])}"
    href = run_url(corpus, service, ack["run_id"])
    messages.success(request, format_html('{} set to TODO in <a href="{}">run {}</a>.', tasks, href, ack["run_id"]))
    return redirect(_back(request, corpus, service))


def _pair_write(
    request: HttpRequest, corpus: str, service: str, call: Callable[[], dict[str, Any]], done: str
) -> HttpResponse:
    """One write on the pair, serialized as its API twin answers; `done` is formatted with it."""
    ack, refused = screen_write(request, call, form=lambda exc: _overview_page(request, corpus, service, error=exc))
    if refused:
        return refused
    assert ack is not None  # screen_write gives the result when it gives no refusal
    messages.success(request, done.format(**ack))
    return redirect(report_url(corpus, service))


def _run_control_write(
    request: HttpRequest, corpus: str, service: str, action: RunControlAction, done: str
) -> HttpResponse:
    """A pause or resume of the pair's run, as its API twin answers it."""
    return _pair_write(
        request, corpus, service,
        lambda: serializers.RunControlSerializer(
            run_control(action=action, corpus_name=corpus, service_name=service, actor=request.user.username)
        ).data,
        done,
    )  # fmt: skip


@login_required
@require_POST
def pause_view(request: HttpRequest, corpus: str, service: str) -> HttpResponse:
    """Screen twin of POST /api/reports/<c>/<s>/pause: block the pair's tasks in progress."""
    return _run_control_write(
        request, corpus, service, RunControlAction.PAUSE, "Paused: {blocked} tasks in progress blocked."
    )


@login_required
@require_POST
def resume_view(request: HttpRequest, corpus: str, service: str) -> HttpResponse:
    """Screen twin of POST /api/reports/<c>/<s>/resume: blocked tasks of the pair back to TODO."""
    return _run_control_write(
        request, corpus, service, RunControlAction.RESUME, "Resumed: {resumed} blocked tasks back to TODO."
    )


@login_required
@require_POST
def refresh_view(request: HttpRequest, corpus: str, service: str) -> HttpResponse:
    """Screen twin of POST /api/reports/<c>/<s>/refresh: clear the pair's report grains at once."""
    return _pair_write(
        request, corpus, service,
        lambda: serializers.ScopeRefreshSerializer(
            pair_refresh(corpus_name=corpus, service_name=service, actor=request.user.username)
        ).data,
        "Cleared {cleared_slices} report slices; each page rebuilds its slice when next read.",
    )  # fmt: skip


# --- sandbox corpora ---------------------------------------------------------------------------------

_NOT_IN_NAMES = re.compile(r"[^A-Za-z0-9._-]+")


def sandbox_form(
    corpus: str, service: str, severity: str, category: str | None = None, what: str | None = None
) -> dict[str, Any]:
    """The "carve sandbox" form of a report level, prefilled with its condition and a name made of it."""
    words = [_NOT_IN_NAMES.sub("-", part).strip("-._") for part in (corpus, severity, category, what) if part]
    name = "-".join(word for word in words if word)[:NAME_MAX].rstrip("-._") or "sandbox"
    return {
        "parent": corpus, "service": service, "severity": severity, "category": category or "", "what": what or "",
        "name": name if name_is_valid(name) else "sandbox", "per_class_limit": 5 if what is None else "",
    }  # fmt: skip
