"""Corpora screens: the same queries, DTOs and input serializers as /api/corpora, the same actions.

Reads are public like their API twin; every write needs a signed-in operator."""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import partial
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import FileResponse, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from config.api.paging import page_check
from config.errors import ServiceError
from config.screens import (
    HTMX_STOP_POLLING,
    deletion_write,
    error_page,
    form_again,
    form_params,
    given,
    pager,
    screen_write,
    validated,
)
from corpora.actions import corpora as actions
from corpora.choices import CorpusState
from corpora.experiments.actions import experiment_start
from corpora.experiments.queries import experiment_detail, experiment_records
from corpora.experiments.serializers import (
    ExperimentDetailSerializer,
    ExperimentRequestSerializer,
    ExperimentSerializer,
)
from corpora.export.actions import dataset_export
from corpora.export.queries import MANIFEST, export_file, export_summaries
from corpora.links import document_list_url, document_reader_url, document_url, report_url
from corpora.queries.corpora import corpus_detail, corpus_records, document_list, pair_resolve
from corpora.serializers import (
    CorpusDetailSerializer,
    CorpusSerializer,
    DocumentListParamsSerializer,
    DocumentListSerializer,
    ExportRequestSerializer,
    ExportSerializer,
    ImportRequestSerializer,
    SandboxRequestSerializer,
)
from corpora.statuses import STATUS_FILTERS
from jobs.choices import ACTIVE_STATES
from jobs.models import Job
from services.queries import service_list
from services.serializers import ServiceSerializer


def _job_write(
    request: HttpRequest, start: Callable[[], Job], *, form: Callable[[ServiceError], HttpResponse] | None = None
) -> HttpResponse:
    """A write that starts a job, for a screen (config.screens.screen_write): the job's screen, or the answer
    to its refusal."""
    job, refused = screen_write(request, start, form=form)
    if refused:
        return refused
    assert job is not None  # screen_write gives the result when it gives no refusal
    return redirect("job", uuid=job.uuid)


@require_GET
def corpus_list_view(request: HttpRequest) -> HttpResponse:
    """Screen twin of GET /api/corpora."""
    return render(request, "corpora/list.html", {"corpora": CorpusSerializer(corpus_records(), many=True).data})


@login_required
@require_http_methods(["GET", "POST"])
def corpus_new_view(request: HttpRequest) -> HttpResponse:
    """Screen twin of POST /api/corpora: the import form, answered with the job screen."""
    if request.method == "GET":
        return render(request, "corpora/new.html", {"form": {}})
    return _job_write(
        request,
        lambda: actions.corpus_import(
            actor=request.user.username, submitted=ImportRequestSerializer(data=request.POST)
        ),
        form=form_again(request, "corpora/new.html", {"form": form_params(request.POST)}),
    )


def _corpus_page(request: HttpRequest, name: str, *, error: ServiceError | None = None) -> HttpResponse:
    try:
        corpus = CorpusDetailSerializer(corpus_detail(name)).data
    except ServiceError as exc:
        return error_page(request, exc)
    busy = corpus["state"] == CorpusState.IMPORTING or any(s["counts"]["in_progress"] > 0 for s in corpus["services"])
    if request.GET.get("fragment") == "body":
        response = render(request, "corpora/_detail_body.html", {"corpus": corpus, "busy": busy, **_origin(corpus)})
        if not busy:
            response.status_code = HTMX_STOP_POLLING
        return response
    context = {"corpus": corpus, "busy": busy, "error": error.detail if error else "", **_origin(corpus)}
    context["comparable"] = [s["name"] for s in corpus["services"] if not s["protected"] and s["counts"]["total"]]
    if request.user.is_authenticated:
        context["activatable"] = _activatable(corpus)
    return render(request, "corpora/detail.html", context, status=error.status if error else 200)


def _activatable(corpus: dict[str, Any]) -> list[str]:
    """Registered services the corpus could take: the DTOs of GET /api/services, less the ones on it."""
    present = {s["name"] for s in corpus["services"]}
    services = ServiceSerializer(service_list(), many=True).data
    return [s["name"] for s in services if not s["protected"] and s["name"] not in present]


@require_GET
def corpus_detail_view(request: HttpRequest, name: str) -> HttpResponse:
    """Screen twin of GET /api/corpora/<name>; polls itself while anything is in progress."""
    return _corpus_page(request, name)


@login_required
@require_POST
def corpus_extend_view(request: HttpRequest, name: str) -> HttpResponse:
    """Screen twin of POST /api/corpora/<name>/extend."""
    return _job_write(
        request,
        lambda: actions.corpus_extend(name=name, actor=request.user.username),
        form=lambda exc: _corpus_page(request, name, error=exc),
    )


@login_required
@require_POST
def activation_create_view(request: HttpRequest, name: str) -> HttpResponse:
    """Screen twin of POST /api/corpora/<corpus>/services/<service>: the service comes from a select."""
    service = request.POST.get("service", "")
    return _job_write(
        request,
        lambda: actions.service_activate(corpus_name=name, service_name=service, actor=request.user.username),
        form=lambda exc: _corpus_page(request, name, error=exc),
    )


@login_required
@require_http_methods(["GET", "POST"])
def corpus_delete_view(request: HttpRequest, name: str) -> HttpResponse:
    """Screen twin of DELETE /api/corpora/<name>?confirm=<name>: the operator types the name."""
    try:
        corpus = CorpusDetailSerializer(corpus_detail(name)).data
    except ServiceError as exc:
        return error_page(request, exc)
    if request.method == "GET":
        return render(request, "corpora/delete.html", {"corpus": corpus})
    return deletion_write(
        request,
        partial(actions.corpus_delete, name=name),
        page=("corpora/delete.html", {"corpus": corpus}),
        done=f"The corpus {name} was deleted with all its documents, tasks and messages.",
        then=reverse("corpora"),
    )


@login_required
@require_http_methods(["GET", "POST"])
def activation_delete_view(request: HttpRequest, name: str, service: str) -> HttpResponse:
    """Screen twin of DELETE /api/corpora/<corpus>/services/<service>?confirm=<service>."""
    try:
        corpus = CorpusDetailSerializer(corpus_detail(name)).data
    except ServiceError as exc:
        return error_page(request, exc)
    entry = next((s for s in corpus["services"] if s["name"] == service and s["activated_at"]), None)
    context = {"corpus": corpus, "service": entry or {"name": service}}
    if request.method == "GET":
        if entry is None:
            detail = f"The service {service!r} is not active on the corpus {name!r}."
            return render(request, "error.html", {"status": 404, "detail": detail}, status=404)
        return render(request, "corpora/deactivate.html", context)
    return deletion_write(
        request,
        partial(actions.service_deactivate, corpus_name=name, service_name=service),
        page=("corpora/deactivate.html", context),
        done=f"The service {service} was deactivated on {name}; its tasks and messages are gone.",
        then=reverse("corpus", kwargs={"name": name}),
    )


@require_GET
def document_list_view(request: HttpRequest, corpus: str, service: str) -> HttpResponse:
    """Screen twin of GET /api/corpora/<c>/services/<s>/documents: a page of the pair's documents, each
    linked to its document screen and, when it has HTML, to its reader."""
    try:
        query = validated(DocumentListParamsSerializer(data=given(request.GET)))
        page = page_check(query.get("offset"), query.get("page_size"))
        listing = document_list(
            pair_resolve(corpus, service), status=query.get("status"), name_prefix=query.get("name_prefix"), page=page
        )
        documents = DocumentListSerializer(listing).data
    except ServiceError as exc:
        return error_page(request, exc)
    corpus, service = documents["corpus"], documents["service"]
    rows = [
        {
            "row": row,
            "href": document_url(corpus, service, row["document"]),
            "reader_href": document_reader_url(corpus, service, row["document"]) if row["has_html"] else None,
        }
        for row in documents["documents"]
    ]
    filters = {key: documents[key] for key in ("status", "name_prefix") if documents[key]}
    context = {
        "documents": documents,
        "rows": rows,
        "statuses": list(STATUS_FILTERS),
        "pager": pager(documents["offset"], documents["page_size"], len(rows), documents["count"], filters),
        "crumbs": [
            {"label": "Corpora", "href": reverse("corpora")},
            {"label": corpus, "href": reverse("corpus", kwargs={"name": corpus})},
            {"label": f"documents of {service}", "href": None},
        ],
        "report_href": report_url(corpus, service),
    }
    return render(request, "corpora/documents.html", context)


# --- dataset export -------------------------------------------------------------------------------


@login_required
@require_POST
def export_create_view(request: HttpRequest, corpus: str, service: str) -> HttpResponse:
    """Screen twin of POST /api/corpora/<c>/services/<s>/export-dataset: the form on the report overview;
    a refused request gets the error screen with its status and words."""
    params = form_params(request.POST)
    data = {"group_by": params.get("group_by", ""), "severities": request.POST.getlist("severities"),
            "out": params.get("out") or None}  # fmt: skip
    return _job_write(
        request,
        lambda: dataset_export(
            corpus=corpus, service=service, actor=request.user.username, submitted=ExportRequestSerializer(data=data)
        ),
    )


@login_required
@require_GET
def export_list_view(request: HttpRequest) -> HttpResponse:
    """Screen twin of GET /api/exports: finished exports, their manifests and download links."""
    exports = ExportSerializer(export_summaries(), many=True).data
    rows = [
        {
            "export": item,
            "manifest_href": reverse("export-file", kwargs={"out": item["out"], "name": MANIFEST}),
            "archives": [
                {"archive": a, "href": reverse("export-file", kwargs={"out": item["out"], "name": a["name"]})}
                for a in item["archives"]
            ],
        }
        for item in exports
    ]
    return render(request, "corpora/exports.html", {"exports": exports, "rows": rows})


@login_required
@require_GET
def export_file_view(request: HttpRequest, out: str, name: str) -> HttpResponse | FileResponse:
    """Screen twin of GET /api/exports/<out>/<name>: an archive or the manifest, to a signed-in operator."""
    try:
        path = export_file(out, name)
    except ServiceError as exc:
        return error_page(request, exc)
    return FileResponse(path.open("rb"), as_attachment=True, filename=name)


# --- sandbox corpora ------------------------------------------------------------------------------

SANDBOX_FORM_FIELDS = tuple(SandboxRequestSerializer().fields)


def _origin(corpus: dict[str, Any]) -> dict[str, Any]:
    """Where a sandbox came from: the parent's report level of its condition, and its limits."""
    condition = corpus.get("condition")
    if not condition or not corpus["parent"]:
        return {}
    levels = [condition.get(key) for key in ("severity", "category", "what")]
    levels = levels[: levels.index(None)] if None in levels else levels
    limits = [(key.replace("_", " "), condition[key]) for key in SANDBOX_LIMITS if condition.get(key) is not None]
    return {
        "origin_href": report_url(corpus["parent"], condition["service"], *levels),
        "condition_parts": levels,
        "condition_limits": limits,
    }


SANDBOX_LIMITS = ("status", "entry_contains", "per_class_limit", "limit", "seed")


def _problems(exc: ServiceError) -> str:
    """A refusal's field errors in one line: the sandbox form sits on a report page, not a page of its own."""
    return "; ".join(f"{field}: {' '.join(map(str, words))}" for field, words in (exc.errors or {}).items())


@login_required
@require_POST
def corpus_sandbox_view(request: HttpRequest, parent: str) -> HttpResponse:
    """Screen twin of POST /api/corpora/<parent>/sandbox: the report level's form, answered with the job."""
    fields = given(request.POST, SANDBOX_FORM_FIELDS)
    job, refused = screen_write(
        request,
        lambda: actions.corpus_sandbox(
            parent=parent, actor=request.user.username, submitted=SandboxRequestSerializer(data=fields)
        ),
        form=lambda exc: error_page(request, type(exc)(f"{exc.detail} {_problems(exc)}".strip())),
    )
    if refused:
        return refused
    assert job is not None  # screen_write gives the result when it gives no refusal
    messages.success(request, f"Carving the sandbox {job.params['name']} from {parent}.")
    return redirect("job", uuid=job.uuid)


# --- profile experiments --------------------------------------------------------------------------


@require_GET
def experiment_list_view(request: HttpRequest) -> HttpResponse:
    """Screen twin of GET /api/experiments."""
    experiments = ExperimentSerializer(experiment_records(), many=True).data
    return render(request, "corpora/experiments.html", {"experiments": experiments})


def _variants_parsed(text: str) -> Any:
    """The form's variants as the API's body takes them: a JSON list; text that is no JSON stays text, which
    the input serializer refuses as it refuses it on the API."""
    try:
        return json.loads(text)
    except ValueError:
        return text


def _variant_problems(exc: ServiceError) -> str:
    """What is wrong with the variants, as the API's errors say it (JSON): they are JSON on the form too."""
    problems = (exc.errors or {}).get("variants") if isinstance(exc.errors, dict) else None
    return json.dumps(problems, ensure_ascii=False) if problems else ""


@login_required
@require_http_methods(["GET", "POST"])
def experiment_new_view(request: HttpRequest) -> HttpResponse:
    """Screen twin of POST /api/experiments: the form (a pair and the variants as JSON), answered with the job."""
    if request.method == "GET":
        return render(request, "corpora/experiment_new.html", {"form": given(request.GET).dict()})
    fields = {key: request.POST.get(key, "") for key in ("corpus", "service", "name")}
    fields["variants"] = _variants_parsed(request.POST.get("variants", ""))
    job, refused = screen_write(
        request,
        lambda: experiment_start(actor=request.user.username, submitted=ExperimentRequestSerializer(data=fields)),
        form=lambda exc: form_again(
            request, "corpora/experiment_new.html",
            {"form": form_params(request.POST), "variant_problems": _variant_problems(exc)},
        )(exc),
    )  # fmt: skip
    if refused:
        return refused
    assert job is not None  # screen_write gives the result when it gives no refusal
    messages.success(request, f"Starting the experiment {job.params['name']}.")
    return redirect("experiment", name=job.params["name"])


@require_GET
def experiment_detail_view(request: HttpRequest, name: str) -> HttpResponse:
    """Screen twin of GET /api/experiments/<name>: the variants ranked, each number's papers linked to their
    document screens; polls itself while the job runs or a variant converts."""
    try:
        detail = ExperimentDetailSerializer(experiment_detail(name)).data
    except ServiceError as exc:
        return error_page(request, exc)
    record = detail["experiment"]
    busy = record["state"] in ACTIVE_STATES or any(v["done"] < v["total"] for v in detail["variants"])
    rows = [
        {
            "variant": variant,
            "href": document_list_url(record["sandbox"], variant["service"]) if record["sandbox"] else None,
            **{
                f"{change}_links": [
                    {"name": paper["name"], "href": document_url(record["sandbox"], variant["service"], paper["name"])}
                    for paper in variant[f"{change}_papers"]
                ]
                if record["sandbox"]
                else []
                for change in ("fixed", "broken")
            },
        }
        for variant in detail["variants"]
    ]
    context = {"detail": detail, "record": record, "rows": rows, "busy": busy}
    if request.GET.get("fragment") == "body":
        response = render(request, "corpora/_experiment_body.html", context)
        if not busy:
            response.status_code = HTMX_STOP_POLLING
        return response
    return render(request, "corpora/experiment.html", context)
