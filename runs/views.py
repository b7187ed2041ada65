"""Run screens: the run history, a pair's run page, diffs of two snapshots as heat maps with their task
lists, and the comparison of two converters; the same queries, DTOs and input serializers as /api/runs
and /api/compare.

Reads are public like their API twins; taking a snapshot needs a signed-in operator and is journaled.
The retention screen (pruning of old history, admins only) has no API twin: history is append-only
over the API.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.template.defaultfilters import filesizeformat
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from config.api.paging import page_check
from config.errors import BadRequest, Forbidden, ServiceError
from config.names import name_check
from config.screens import duration_text, error_page, pager, screen_write, validated
from conversion.choices import PackageKind
from corpora.actions.history import diff_read, history_prune, snapshot_append, task_diffs_read
from corpora.choices import ClassChange, MemberChange
from corpora.queries.classes import class_diff, class_diff_count, class_known, class_split, class_tasks
from corpora.queries.compare import compare_scope, compare_tasks
from corpora.queries.corpora import pair_resolve
from corpora.queries.cost import pair_cost
from corpora.queries.diffs import DiffScope, diff_scope, task_diff_count
from corpora.queries.history import pair_runs, run_current
from corpora.queries.packages import kind_check, package_diff, package_papers, package_ranking, package_source
from corpora.queries.prune import CUTOFF_HELP, PruneCounts, prune_preview
from corpora.queries.telemetry import pair_telemetry
from runs import reads
from runs.charts import heat_map, history_strip, run_chart, stage_charts, throughput_chart
from runs.links import class_tasks_url, document_url, report_url, run_url
from runs.serializers import (
    ComparePickSerializer,
    CurrentRunSerializer,
    PruneParamsSerializer,
    PruneSummarySerializer,
)

# The run page lists this many regressions; a link leads to all of them.
REGRESSIONS_SHOWN = 50
# The run page and the diff screen list this many new and fixed failure classes; a link leads to all.
FAILURES_SHOWN = 10
FAILURE_SEVERITIES = "error,fatal"
# The package screen offers the pair's latest runs to read.
RUNS_PICKED = 50


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


def _query(**params: Any) -> str:
    return "?" + urlencode({key: value for key, value in params.items() if value not in (None, "")})


def tasks_href(corpus: str, service: str, diff: dict[str, Any], **filters: str | None) -> str:
    """The task list of a diff's two snapshots, optionally of one transition or only its regressions, without
    the infrastructure failures' documents when the diff leaves them out."""
    path = reverse("runs-tasks", kwargs={"corpus": corpus, "service": service})
    exclude = "true" if diff["exclude_infrastructure"] else None
    return path + _query(previous=diff["previous"], current=diff["current"], exclude_infrastructure=exclude, **filters)


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
        runs = reads.run_list.screen_data(request.GET)
    except ServiceError as exc:
        return error_page(request, exc)
    filters = {key: request.GET.get(key, "") for key in ("corpus", "service", "owner", "limit")}
    return render(request, "runs/list.html", {"runs": runs, "rows": run_rows(runs), "filters": filters})


@require_GET
def pair_view(request: HttpRequest, corpus: str, service: str) -> HttpResponse:
    """The run page of a pair: twin of GET /api/runs/<c>/<s> (history), .../current (the open run and its
    ETA), .../telemetry (throughput and stage times), .../cost (CPU time, peak memory, projections),
    .../diff (the two latest snapshots) and .../tasks?change=regressed (what got worse)."""
    try:
        query = reads.pair_run_list.screen_query(request.GET)
        pair = pair_resolve(corpus, service)
        runs = reads.pair_run_list.render(pair_runs(pair, **query))
        current = run_current(pair)
        telemetry = reads.telemetry.render(pair_telemetry(pair))
        cost = reads.cost.render(pair_cost(pair))
        scope = diff_scope(pair)
        _, record = diff_read(scope)
        diff = reads.run_diff.render(record)
        page = page_check(0, REGRESSIONS_SHOWN)
        regressions = reads.task_diffs.render(task_diffs_read(scope, page, change="regressed"))
    except ServiceError as exc:
        return error_page(request, exc)
    dates = diff["available_dates"]
    context = {
        "corpus": corpus,
        "service": service,
        "runs": runs,
        "current": CurrentRunSerializer(current).data if current else None,
        "telemetry": telemetry,
        "cost": cost,
        "cost_runs": [("open run", cost["open_run"]), ("closed run", cost["last_closed_run"])],
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


def _diff_href(corpus: str, service: str, previous: str, current: str, *, exclude: bool = False) -> str:
    path = reverse("runs-diff", kwargs={"corpus": corpus, "service": service})
    return path + _query(previous=previous, current=current, exclude_infrastructure="true" if exclude else None)


@login_required
@require_POST
def snapshot_view(request: HttpRequest, corpus: str, service: str) -> HttpResponse:
    """Screen twin of POST /api/corpora/<c>/services/<s>/snapshot: the pair's statuses as one snapshot."""
    done, refused = screen_write(
        request, lambda: snapshot_append(corpus_name=corpus, service_name=service, actor=request.user.username)
    )
    if refused:
        return refused
    assert done is not None  # screen_write answers the result or the refusal
    taken_at = timezone.localtime(done.taken_at).isoformat(sep=" ")[:19]
    messages.success(request, f"Snapshot of {done.rows} tasks taken at {taken_at}.")
    return redirect("runs-pair", corpus=corpus, service=service)


# --- diffs -------------------------------------------------------------------------------------------


@require_GET
def diff_view(request: HttpRequest, corpus: str, service: str) -> HttpResponse:
    """Screen twin of GET /api/runs/<c>/<s>/diff: two snapshot dates to pick and their matrix as a heat
    map whose cells lead to their documents."""
    try:
        query = reads.run_diff.screen_query(request.GET)
        exclude = query.pop("exclude_infrastructure", False)
        scope = diff_scope(pair_resolve(corpus, service), **query)
        _, record = diff_read(scope, exclude_infrastructure=exclude)
        diff = reads.run_diff.render(record)
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
        query = reads.task_diffs.screen_query(request.GET)
        page = reads.paged(query)
        scope = reads.scoped(query, corpus, service)
        diff_id, record = diff_read(scope, exclude_infrastructure=query.get("exclude_infrastructure", False))
        diff = reads.run_diff.render(record)
        tasks = reads.task_diffs.render(task_diffs_read(scope, page, **query))
        count = task_diff_count(diff_id, **query)
    except ServiceError as exc:
        return error_page(request, exc)
    # Pages stay on the same two snapshots, whatever is taken meanwhile.
    kept = {"previous": diff["previous"], "current": diff["current"], **query}
    diff_href = None
    if diff["previous"]:
        exclude = diff["exclude_infrastructure"]
        diff_href = _diff_href(corpus, service, diff["previous"], diff["current"], exclude=exclude)
    context = {
        "diff": diff,
        "tasks": tasks,
        "filters": query,
        "rows": task_rows(corpus, service, tasks),
        "count": count,
        "diff_href": diff_href,
        "pager": pager(page.offset, page.page_size, len(tasks), count, {k: v for k, v in kept.items() if v}),
        "crumbs": crumbs(corpus, service, ("diff", diff_href), ("documents", None)),
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
    two snapshots, for the run page and the diff screen; a note instead when the snapshots cannot say. The
    infrastructure failures' classes are left out: the machine's doing, not the converter's."""
    if scope.previous is None or scope.current is None:
        return {"note": "Two snapshots are needed to compare their message classes."}
    page = page_check(0, FAILURES_SHOWN)
    try:
        new, fixed = (
            reads.class_changes.render(
                class_diff(scope, page, kind=kind, severity=FAILURE_SEVERITIES, exclude_infrastructure=True)
            )
            for kind in (ClassChange.INCREASED, ClassChange.DECREASED)
        )
    except BadRequest as exc:
        return {"note": str(exc.detail)}
    return {
        "new": class_rows(corpus, service, scope, new),
        "fixed": class_rows(corpus, service, scope, fixed),
        "new_href": _failures_href(corpus, service, scope, ClassChange.INCREASED),
        "fixed_href": _failures_href(corpus, service, scope, ClassChange.DECREASED),
        "all_href": classes_href(corpus, service, scope),
    }


def _failures_href(corpus: str, service: str, scope: DiffScope, kind: str) -> str:
    """The class diff screen of the failure classes that grew (INCREASED) or shrank, as top_failures counts them."""
    return classes_href(corpus, service, scope, kind=kind, severity=FAILURE_SEVERITIES, exclude_infrastructure="true")


@require_GET
def classes_view(request: HttpRequest, corpus: str, service: str) -> HttpResponse:
    """Screen twin of GET /api/runs/<c>/<s>/classes: the message classes whose task count changed between
    two snapshots, the largest change first, each linked to the documents that gained or lost it."""
    try:
        query = reads.class_changes.screen_query(request.GET)
        page = reads.paged(query)
        scope = reads.scoped(query, corpus, service)
        changes = reads.class_changes.render(class_diff(scope, page, **query))
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
        query = reads.class_task_list.screen_query(request.GET)
        page = reads.paged(query)
        scope = reads.scoped(query, corpus, service)
        cls = class_known(severity, *class_split(severity, rest))
        tasks = reads.class_task_list.render(class_tasks(scope, cls, query["change"], page))
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
        history = reads.history.screen_data(request.GET, corpus=corpus, service=service, name=name)
    except ServiceError as exc:
        return error_page(request, exc)
    rows = [
        {"entry": entry, "run_href": run_url(corpus, service, entry["run"]["id"]) if entry["run"] else None}
        for entry in history["entries"]
    ]
    context = {
        "history": history,
        "rows": rows,
        "strip": history_strip(history["entries"]),
        "crumbs": crumbs(corpus, service, (name, history["report_url"]), ("history", None)),
    }
    return render(request, "runs/history.html", context)


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
        compare = reads.compare.screen_data(request.GET, corpus=corpus, service_a=service_a, service_b=service_b)
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
        query = reads.compare_task_list.screen_query(request.GET)
        page = reads.paged(query)
        tasks = reads.compare_task_list.render(
            compare_tasks(compare_scope(corpus, service_a, service_b), page, **query)
        )
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
    the cutoff typed again as `confirm` prunes (corpora.actions.history.history_prune, journaled)."""
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
            total = history_prune(**params, actor=request.user.username).total
            messages.success(request, _removed_sentence(total))
            return redirect(reverse("runs-retention") + "?" + urlencode(form))
        context["summary"] = PruneSummarySerializer(prune_preview(**params)).data
    except ServiceError as exc:
        field_errors = [str(error) for errors in (exc.errors or {}).values() for error in errors]
        context["error"] = " ".join(field_errors) or exc.detail
        return render(request, "runs/retention.html", context, status=exc.status)
    return render(request, "runs/retention.html", context)


def _removed_sentence(total: PruneCounts) -> str:
    return (
        f"Pruned {total.runs} runs, {total.snapshots} snapshots and {total.diffs} diffs"
        f" ({total.diff_rows} diff rows), freeing {filesizeformat(total.bytes)} for reuse."
    )


# --- package attribution -------------------------------------------------------------------------


def _package_href(corpus: str, service: str, row: dict[str, Any], run: int | None) -> str:
    path = reverse("runs-package-papers", kwargs={"corpus": corpus, "service": service, "kind": row["kind"],
                                                  "package": row["package"]})  # fmt: skip
    return path + _query(run=run) if run else path


@require_GET
def packages_view(request: HttpRequest, corpus: str, service: str) -> HttpResponse:
    """Screen twin of GET /api/runs/<c>/<s>/packages: the packages and classes the pair's papers used (or a
    run's, as its snapshot froze them), ranked by the papers each alone keeps from being error-free."""
    try:
        query = reads.packages.screen_query(request.GET)
        page = reads.paged(query)
        pair = pair_resolve(corpus, service)
        source = package_source(pair, query.get("run"))
        ranking = reads.packages.render(package_ranking(source, page, kind_check(query.get("kind"))))
        runs = pair_runs(pair, limit=RUNS_PICKED)
    except ServiceError as exc:
        return error_page(request, exc)
    kept = {key: value for key, value in query.items() if value}
    context = {
        "ranking": ranking,
        "filters": query,
        "kinds": [kind.value for kind in PackageKind],
        "runs": [{"id": run.id, "started_at": run.started_at.isoformat(), "open": run.open} for run in runs],
        "rows": [
            {"row": row, "href": _package_href(corpus, service, row, query.get("run"))} for row in ranking["rows"]
        ],
        "diff_href": reverse("runs-package-diff", kwargs={"corpus": corpus, "service": service}),
        "pager": pager(page.offset, page.page_size, len(ranking["rows"]), ranking["count"], kept),
        "crumbs": crumbs(corpus, service, ("packages", None)),
    }
    return render(request, "runs/packages.html", context)


@require_GET
def package_papers_view(request: HttpRequest, corpus: str, service: str, kind: str, package: str) -> HttpResponse:
    """Screen twin of GET /api/runs/<c>/<s>/packages/<kind>/<package>: the papers behind one row."""
    try:
        query = reads.package_paper_list.screen_query(request.GET)
        page = reads.paged(query)
        source = package_source(pair_resolve(corpus, service), query.get("run"))
        papers = reads.package_paper_list.render(package_papers(source, kind_check(kind) or "", package, page))
    except ServiceError as exc:
        return error_page(request, exc)
    kept = {key: value for key, value in query.items() if value}
    ranking_href = reverse("runs-packages", kwargs={"corpus": corpus, "service": service})
    ranking_href += _query(run=query["run"]) if query.get("run") else ""
    context = {
        "kind": kind,
        "package": package,
        "papers": papers,
        "run": source.run_id if source.snapshot_id is not None else None,
        "pager": pager(page.offset, page.page_size, len(papers), None, kept),
        "crumbs": crumbs(corpus, service, ("packages", ranking_href), (package, None)),
    }
    return render(request, "runs/package_papers.html", context)


@require_GET
def package_diff_view(request: HttpRequest, corpus: str, service: str) -> HttpResponse:
    """Screen twin of GET /api/runs/<c>/<s>/packages/diff: the packages that gained or lost papers between
    two snapshots."""
    try:
        query = reads.package_changes.screen_query(request.GET)
        page = reads.paged(query)
        scope = reads.scoped(query, corpus, service)
        diff = reads.package_changes.render(package_diff(scope, page))
    except ServiceError as exc:
        return error_page(request, exc)
    kept = {key: value for key, value in _dates(scope).items() if value}
    ranking_href = reverse("runs-packages", kwargs={"corpus": corpus, "service": service})
    context = {
        "diff": diff,
        "pager": pager(page.offset, page.page_size, len(diff["changes"]), None, kept),
        "crumbs": crumbs(corpus, service, ("packages", ranking_href), ("diff", None)),
    }
    return render(request, "runs/package_diff.html", context)
