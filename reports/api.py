"""API of the reports app: overview, severity > category > what > documents, one document and its
converted paper's files, every message of a slice as data, runtimes, rerun, refresh, and pausing and
resuming conversions."""

from __future__ import annotations

from django.http import HttpResponseRedirect, StreamingHttpResponse
from django.utils.http import content_disposition_header
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response

from accounts.api_base import PublicApiView, TokenApiView
from config.api.negotiation import FileNegotiation
from config.api.paging import Page, PageParamsSerializer, page_check
from config.api.schema import problems
from corpora.actions.reports import (
    category_report_read,
    pair_refresh,
    reports_refresh,
    rerun,
    run_control,
    what_report_read,
)
from corpora.choices import RunControlAction
from corpora.queries.corpora import pair_resolve
from corpora.queries.reports import (
    document_paper,
    document_report,
    document_result_archive,
    entry_list,
    messages_export,
    report_path_split,
    runtime_report,
    service_overview,
)
from corpora.results import result_member
from jobs.serializers import JobAckSerializer
from reports.links import document_file_api_url
from reports.serializers import (
    EXPORT_FORMATS,
    DocumentReportSerializer,
    EntryListSerializer,
    GrainReportSerializer,
    MessagesExportParamsSerializer,
    RerunAckSerializer,
    RerunParamsSerializer,
    RunControlSerializer,
    RuntimeReportSerializer,
    ScopeRefreshSerializer,
    ServiceOverviewSerializer,
    export_chunks,
    export_file_name,
    paper_file_response,
)


def _run_control_api(action: RunControlAction, operation_id: str, summary: str, *, pair: bool) -> type[TokenApiView]:
    """The API view of one pause or resume: of a pair's run (corpus and service in the path) or of every
    conversion."""
    responses = {200: RunControlSerializer, **problems(404)} if pair else {200: RunControlSerializer}

    class RunControlApi(TokenApiView):
        @extend_schema(operation_id=operation_id, summary=summary, request=None, responses=responses, tags=["reports"])
        def post(self, request: Request, **names: str) -> Response:
            scope = {"corpus_name": names["corpus"], "service_name": names["service"]} if pair else {}
            return Response(RunControlSerializer(run_control(action=action, actor=self.actor_name(), **scope)).data)

    return RunControlApi


PairPauseApi = _run_control_api(
    RunControlAction.PAUSE, "reports_pause", "Pause a run: block the pair's tasks in progress", pair=True
)
PairResumeApi = _run_control_api(
    RunControlAction.RESUME, "reports_resume", "Resume a run: blocked tasks of the pair back to TODO", pair=True
)
FleetPauseApi = _run_control_api(
    RunControlAction.PAUSE, "conversions_pause", "Pause every conversion: block all tasks in progress", pair=False
)
FleetResumeApi = _run_control_api(
    RunControlAction.RESUME,
    "conversions_resume",
    "Resume every conversion: all blocked tasks back to TODO",
    pair=False,
)


# --- reports --------------------------------------------------------------------------------------

ACTION_PATH = OpenApiResponse(
    description="The severity is pause, resume, rerun or refresh: that path is the pair's POST action"
)

# From the serializer that checks them, so the document states the same bounds (minimum 0 and 1).
PAGE = [PageParamsSerializer]


def _page(request: Request) -> Page:
    params = PageParamsSerializer(data=request.query_params)
    params.is_valid(raise_exception=True)
    return page_check(params.validated_data.get("offset"), params.validated_data.get("page_size"))


class OverviewApi(PublicApiView):
    @extend_schema(
        operation_id="reports_overview", summary="Service overview: total and per-status counts and percentages",
        responses={200: ServiceOverviewSerializer, **problems(404)}, tags=["reports"],
    )  # fmt: skip
    def get(self, request: Request, corpus: str, service: str) -> Response:
        return Response(ServiceOverviewSerializer(service_overview(pair_resolve(corpus, service))).data)


class CategoryReportApi(PublicApiView):
    @extend_schema(
        operation_id="reports_categories", summary="Category report of a severity, by task count, paginated",
        parameters=PAGE, tags=["reports"],
        # The severities pause, resume, rerun and refresh name the pair's POST actions instead: 405.
        responses={200: GrainReportSerializer, **problems(400, 404), 405: ACTION_PATH},
    )  # fmt: skip
    def get(self, request: Request, corpus: str, service: str, severity: str) -> Response:
        page = _page(request)
        report = category_report_read(pair_resolve(corpus, service), severity, page)
        return Response(GrainReportSerializer(report).data)


class WhatOrEntriesView(PublicApiView):
    """/{severity}/{category} is the what report, /{severity}/{category}/{what} the entry list; both may
    contain '/', so one view splits the rest of the path (see report_path_split)."""

    def _answer(self, request: Request, corpus: str, service: str, severity: str, rest: str) -> Response:
        pair = pair_resolve(corpus, service)
        category, what = report_path_split(pair, severity, rest)
        page = _page(request)
        if what is None:
            return Response(GrainReportSerializer(what_report_read(pair, severity, category, page)).data)
        return Response(EntryListSerializer(entry_list(pair, severity, category, what, page)).data)


class WhatOrEntriesApi(WhatOrEntriesView):
    @extend_schema(
        operation_id="reports_whats", summary="What report of a category, by task count, paginated",
        parameters=PAGE, responses={200: GrainReportSerializer, **problems(400, 404)}, tags=["reports"],
    )  # fmt: skip
    def get(self, request: Request, corpus: str, service: str, severity: str, category: str) -> Response:
        return self._answer(request, corpus, service, severity, category)


class EntryListApi(WhatOrEntriesView):
    @extend_schema(
        operation_id="reports_entries", summary="Entry list: the documents with one (severity, category, what)",
        parameters=PAGE, responses={200: EntryListSerializer, **problems(400, 404)}, tags=["reports"],
    )  # fmt: skip
    def get(self, request: Request, corpus: str, service: str, severity: str, category: str, what: str) -> Response:
        return self._answer(request, corpus, service, severity, f"{category}/{what}")


class DocumentReportApi(PublicApiView):
    @extend_schema(
        operation_id="reports_document", summary="One document's status for a service and every message behind it",
        responses={200: DocumentReportSerializer, **problems(404)}, tags=["reports"],
    )  # fmt: skip
    def get(self, request: Request, corpus: str, service: str, name: str) -> Response:
        return Response(DocumentReportSerializer(document_report(pair_resolve(corpus, service), name)).data)


PAPER_FILE = OpenApiResponse(
    OpenApiTypes.BINARY,
    description="The member, typed by its name, under the paper policy: Content-Security-Policy "
    "sandbox (no script, an opaque origin), X-Content-Type-Options nosniff",
)


class DocumentHtmlApi(PublicApiView):
    content_negotiation_class = FileNegotiation

    @extend_schema(
        operation_id="reports_document_html",
        summary="A document's converted paper: a redirect to its HTML member under files/",
        description="Its relative references (images, CSS) resolve to the other members there. 404 when the "
        "document has no stored result or its result holds no HTML.",
        responses={302: OpenApiResponse(description="Location: the HTML member"), **problems(404)},
        tags=["reports"],
    )  # fmt: skip
    def get(self, request: Request, corpus: str, service: str, name: str) -> HttpResponseRedirect:
        _archive, member = document_paper(pair_resolve(corpus, service), name)
        return HttpResponseRedirect(document_file_api_url(corpus, service, name, member))


class DocumentFileApi(PublicApiView):
    content_negotiation_class = FileNegotiation

    @extend_schema(
        operation_id="reports_document_file",
        summary="One member of a document's stored result (its HTML, images, CSS) under the paper policy",
        responses={(200, "*/*"): PAPER_FILE, **problems(404)},
        tags=["reports"],
    )  # fmt: skip
    def get(self, request: Request, corpus: str, service: str, name: str, member: str) -> StreamingHttpResponse:
        archive = document_result_archive(pair_resolve(corpus, service), name)
        return paper_file_response(result_member(archive, member), member)


class MessagesExportApi(PublicApiView):
    content_negotiation_class = FileNegotiation

    @extend_schema(
        operation_id="reports_messages",
        summary="Every message of a slice (document, entry, status, severity, category, what, details), streamed",
        description="Without severity: every message of the pair, info included. A severity takes its report "
        "page's tasks and message severity; category and what narrow it further. format: csv (with a header "
        "line), jsonl (one JSON object a line) or parquet.",
        parameters=[MessagesExportParamsSerializer], tags=["reports"],
        responses={
            (200, media_type.split(";")[0]): OpenApiResponse(OpenApiTypes.BINARY, description=f"{name} file")
            for name, (media_type, _) in EXPORT_FORMATS.items()
        } | problems(400, 404),
    )  # fmt: skip
    def get(self, request: Request, corpus: str, service: str) -> StreamingHttpResponse:
        return self._answer(request, corpus, service, body=True)

    def head(self, request: Request, corpus: str, service: str) -> StreamingHttpResponse:
        """The same checks and headers, without reading a message (the web server would read them all to
        send none)."""
        return self._answer(request, corpus, service, body=False)

    def _answer(self, request: Request, corpus: str, service: str, *, body: bool) -> StreamingHttpResponse:
        params = MessagesExportParamsSerializer(data=request.query_params)
        params.is_valid(raise_exception=True)
        scope = {key: params.validated_data.get(key) for key in ("severity", "category", "what")}
        export = messages_export(pair_resolve(corpus, service), **scope)
        format_name = params.validated_data["format"]
        chunks = export_chunks(export.batches(), format_name) if body else iter(())
        response = StreamingHttpResponse(chunks, content_type=EXPORT_FORMATS[format_name][0])
        name = export_file_name(export.corpus, export.service, list(scope.values()), format_name)
        response["Content-Disposition"] = content_disposition_header(True, name)
        response["X-Content-Type-Options"] = "nosniff"
        return response


class RuntimeReportApi(TokenApiView):
    @extend_schema(
        operation_id="services_runtimes", summary="Runtime report: distribution, histogram, slowest conversions",
        parameters=PAGE, responses={200: RuntimeReportSerializer, **problems(400, 404)}, tags=["reports"],
    )  # fmt: skip
    def get(self, request: Request, service: str) -> Response:
        return Response(RuntimeReportSerializer(runtime_report(service, _page(request))).data)


class RerunApi(TokenApiView):
    @extend_schema(
        operation_id="reports_rerun", summary="Rerun a slice: its tasks back to TODO in a new run (202)",
        parameters=[RerunParamsSerializer],
        request=None, responses={202: RerunAckSerializer, **problems(400, 404)}, tags=["reports"],
    )  # fmt: skip
    def post(self, request: Request, corpus: str, service: str) -> Response:
        ack = rerun(
            corpus_name=corpus, service_name=service, actor=self.actor_name(),
            submitted=RerunParamsSerializer(data=request.query_params),
        )  # fmt: skip
        return Response(RerunAckSerializer(ack).data, status=status.HTTP_202_ACCEPTED)


class PairRefreshApi(TokenApiView):
    @extend_schema(
        operation_id="reports_refresh_pair", summary="Clear this pair's report grains at once (no job)",
        request=None, responses={200: ScopeRefreshSerializer, **problems(404)}, tags=["reports"],
    )  # fmt: skip
    def post(self, request: Request, corpus: str, service: str) -> Response:
        return Response(
            ScopeRefreshSerializer(pair_refresh(corpus_name=corpus, service_name=service, actor=self.actor_name())).data
        )


class GlobalRefreshApi(TokenApiView):
    @extend_schema(
        operation_id="reports_refresh", summary="Rebuild the report rollup behind every page (debounced job)",
        request=None, responses={202: JobAckSerializer}, tags=["reports"],
    )  # fmt: skip
    def post(self, request: Request) -> Response:
        job, created = reports_refresh(actor=self.actor_name())
        return Response(JobAckSerializer({"job": job, "created": created}).data, status=status.HTTP_202_ACCEPTED)
