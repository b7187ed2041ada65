"""API of runs: history, the open run, snapshots, diffs of two snapshots and their task lists, the message
classes that changed between two snapshots and their documents, a document's history, and the comparison
of two services on one corpus."""

from __future__ import annotations

from typing import Any

from django.http import JsonResponse, StreamingHttpResponse
from django.utils.http import content_disposition_header
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.serializers import Serializer

from accounts.api_base import PublicApiView, TokenApiView
from config.api.negotiation import FileNegotiation
from config.api.paging import page_check
from config.api.schema import problems
from corpora.actions.history import diff_read, snapshot_append, task_diffs_read
from corpora.queries.classes import class_diff, class_known, class_split, class_tasks, document_history
from corpora.queries.compare import compare_matrix, compare_scope, compare_tasks
from corpora.queries.corpora import pair_resolve
from corpora.queries.cost import pair_cost
from corpora.queries.diffs import diff_scope
from corpora.queries.history import pair_runs, run_current, run_history
from corpora.queries.packages import (
    EXPORT_HEADER,
    kind_check,
    package_diff,
    package_export,
    package_papers,
    package_ranking,
    package_source,
)
from corpora.queries.telemetry import pair_telemetry
from runs.serializers import (
    ClassChangeSerializer,
    ClassDiffParamsSerializer,
    ClassTaskSerializer,
    ClassTasksParamsSerializer,
    CompareParamsSerializer,
    CompareSerializer,
    CompareTaskSerializer,
    CostSerializer,
    CurrentRunSerializer,
    DocumentHistorySerializer,
    PackageDiffParamsSerializer,
    PackageDiffSerializer,
    PackagePaperSerializer,
    PackageParamsSerializer,
    PackageRankingSerializer,
    PairRunsParamsSerializer,
    RunDiffParamsSerializer,
    RunDiffSerializer,
    RunListParamsSerializer,
    RunSerializer,
    SnapshotAckSerializer,
    TaskDiffParamsSerializer,
    TaskDiffSerializer,
    TelemetrySerializer,
    package_export_chunks,
)

# The CurrentRun component (a Run with its ETA) or null.
NULLABLE_RUN = {"allOf": [{"$ref": "#/components/schemas/CurrentRun"}], "nullable": True}


def params(serializer: type[Serializer], request: Request) -> dict[str, Any]:
    checked = serializer(data=request.query_params)
    checked.is_valid(raise_exception=True)
    return dict(checked.validated_data)


class RunListApi(PublicApiView):
    @extend_schema(
        operation_id="runs_list", summary="Every run, newest first (filters corpus, service, owner; limit)",
        parameters=[RunListParamsSerializer], responses={200: RunSerializer(many=True), **problems(400)},
        tags=["runs"],
    )  # fmt: skip
    def get(self, request: Request) -> Response:
        return Response(RunSerializer(run_history(**params(RunListParamsSerializer, request)), many=True).data)


class PairRunsApi(PublicApiView):
    @extend_schema(
        operation_id="runs_pair", summary="The runs of a (corpus, service) pair, most recent first",
        parameters=[PairRunsParamsSerializer], responses={200: RunSerializer(many=True), **problems(404)},
        tags=["runs"],
    )  # fmt: skip
    def get(self, request: Request, corpus: str, service: str) -> Response:
        query = params(PairRunsParamsSerializer, request)
        runs = pair_runs(pair_resolve(corpus, service), **query)
        return Response(RunSerializer(runs, many=True).data)


class CurrentRunApi(PublicApiView):
    @extend_schema(
        operation_id="runs_current", summary="The open run of a pair with live tallies, or null",
        responses={200: OpenApiResponse(NULLABLE_RUN, description="the open run, or null"), **problems(404)},
        tags=["runs"],
    )  # fmt: skip
    def get(self, request: Request, corpus: str, service: str) -> Response | JsonResponse:
        run = run_current(pair_resolve(corpus, service))
        if run is None:  # DRF renders None as an empty body; the answer is the JSON literal null
            return JsonResponse(None, safe=False)
        return Response(CurrentRunSerializer(run).data)


class TelemetryApi(PublicApiView):
    @extend_schema(
        operation_id="runs_telemetry",
        summary="Stage times of the open and the last closed run (percentiles, histograms), throughput and ETA",
        responses={200: TelemetrySerializer, **problems(404)}, tags=["runs"],
    )  # fmt: skip
    def get(self, request: Request, corpus: str, service: str) -> Response:
        return Response(TelemetrySerializer(pair_telemetry(pair_resolve(corpus, service))).data)


class CostApi(PublicApiView):
    @extend_schema(
        operation_id="runs_cost",
        summary="Cost of the open and the last closed run: CPU time, papers per core-hour, peak memory, projections",
        responses={200: CostSerializer, **problems(404)}, tags=["runs"],
    )  # fmt: skip
    def get(self, request: Request, corpus: str, service: str) -> Response:
        return Response(CostSerializer(pair_cost(pair_resolve(corpus, service))).data)


class SnapshotApi(TokenApiView):
    @extend_schema(
        operation_id="runs_snapshot", summary="Append the pair's current task statuses as one snapshot (202)",
        request=None, responses={202: SnapshotAckSerializer, **problems(404)}, tags=["runs"],
    )  # fmt: skip
    def post(self, request: Request, corpus: str, service: str) -> Response:
        ack = snapshot_append(corpus_name=corpus, service_name=service, actor=self.actor_name())
        return Response(SnapshotAckSerializer(ack).data, status=status.HTTP_202_ACCEPTED)


class RunDiffApi(PublicApiView):
    @extend_schema(
        operation_id="runs_diff",
        summary="Snapshot dates and the matrix previous status x current status (default: the two latest)",
        parameters=[RunDiffParamsSerializer], responses={200: RunDiffSerializer, **problems(400, 404)},
        tags=["runs"],
    )  # fmt: skip
    def get(self, request: Request, corpus: str, service: str) -> Response:
        query = params(RunDiffParamsSerializer, request)
        exclude = query.pop("exclude_infrastructure", False)
        _, record = diff_read(diff_scope(pair_resolve(corpus, service), **query), exclude_infrastructure=exclude)
        return Response(RunDiffSerializer(record).data)


class TaskDiffsApi(PublicApiView):
    @extend_schema(
        operation_id="runs_tasks",
        summary="Documents whose status changed between two snapshots, by transition, paginated",
        parameters=[TaskDiffParamsSerializer], responses={200: TaskDiffSerializer(many=True), **problems(400, 404)},
        tags=["runs"],
    )  # fmt: skip
    def get(self, request: Request, corpus: str, service: str) -> Response:
        query = params(TaskDiffParamsSerializer, request)
        page = page_check(query.pop("offset", None), query.pop("page_size", None))
        scope = diff_scope(pair_resolve(corpus, service), query.pop("previous", None), query.pop("current", None))
        return Response(TaskDiffSerializer(task_diffs_read(scope, page, **query), many=True).data)


class ClassDiffApi(PublicApiView):
    @extend_schema(
        operation_id="runs_classes",
        summary="Message classes that appeared, vanished, grew or shrank between two snapshots, paginated",
        parameters=[ClassDiffParamsSerializer],
        responses={200: ClassChangeSerializer(many=True), **problems(400, 404)}, tags=["runs"],
    )  # fmt: skip
    def get(self, request: Request, corpus: str, service: str) -> Response:
        query = params(ClassDiffParamsSerializer, request)
        page = page_check(query.pop("offset", None), query.pop("page_size", None))
        scope = diff_scope(pair_resolve(corpus, service), query.pop("previous", None), query.pop("current", None))
        return Response(ClassChangeSerializer(class_diff(scope, page, **query), many=True).data)


class ClassTasksApi(PublicApiView):
    @extend_schema(
        operation_id="runs_class_tasks",
        summary="Documents that gained or lost a message class between two snapshots, paginated",
        parameters=[ClassTasksParamsSerializer],
        responses={200: ClassTaskSerializer(many=True), **problems(400, 404)}, tags=["runs"],
    )  # fmt: skip
    def get(self, request: Request, corpus: str, service: str, severity: str, rest: str) -> Response:
        query = params(ClassTasksParamsSerializer, request)
        page = page_check(query.pop("offset", None), query.pop("page_size", None))
        scope = diff_scope(pair_resolve(corpus, service), query.pop("previous", None), query.pop("current", None))
        cls = class_known(severity, *class_split(severity, rest))
        return Response(ClassTaskSerializer(class_tasks(scope, cls, query["change"], page), many=True).data)


class DocumentHistoryApi(PublicApiView):
    @extend_schema(
        operation_id="document_history",
        summary="A document's status and warning, error and fatal classes in every snapshot of its pair",
        responses={200: DocumentHistorySerializer, **problems(404)}, tags=["runs"],
    )  # fmt: skip
    def get(self, request: Request, corpus: str, service: str, name: str) -> Response:
        return Response(DocumentHistorySerializer(document_history(pair_resolve(corpus, service), name)).data)


class CompareApi(PublicApiView):
    @extend_schema(
        operation_id="compare_services",
        summary="Two services on one corpus: the matrix A's status x B's status over every document",
        responses={200: CompareSerializer, **problems(400, 404)}, tags=["runs"],
    )  # fmt: skip
    def get(self, request: Request, corpus: str, service_a: str, service_b: str) -> Response:
        return Response(CompareSerializer(compare_matrix(compare_scope(corpus, service_a, service_b))).data)


class CompareTasksApi(PublicApiView):
    @extend_schema(
        operation_id="compare_tasks",
        summary="The documents on which two services differ, in document order, paginated",
        parameters=[CompareParamsSerializer],
        responses={200: CompareTaskSerializer(many=True), **problems(400, 404)}, tags=["runs"],
    )  # fmt: skip
    def get(self, request: Request, corpus: str, service_a: str, service_b: str) -> Response:
        query = params(CompareParamsSerializer, request)
        page = page_check(query.pop("offset", None), query.pop("page_size", None))
        tasks = compare_tasks(compare_scope(corpus, service_a, service_b), page, **query)
        return Response(CompareTaskSerializer(tasks, many=True).data)


class PackagesApi(PublicApiView):
    @extend_schema(
        operation_id="runs_packages",
        summary="Packages and classes of a pair or a run, ranked by the papers each alone keeps from being error-free",
        parameters=[PackageParamsSerializer],
        responses={200: PackageRankingSerializer, **problems(400, 404)}, tags=["runs"],
    )  # fmt: skip
    def get(self, request: Request, corpus: str, service: str) -> Response:
        query = params(PackageParamsSerializer, request)
        page = page_check(query.pop("offset", None), query.pop("page_size", None))
        source = package_source(pair_resolve(corpus, service), query.get("run"))
        return Response(PackageRankingSerializer(package_ranking(source, page, kind_check(query.get("kind")))).data)


class PackagePapersApi(PublicApiView):
    @extend_schema(
        operation_id="runs_package_papers", summary="The papers behind one package or class of a ranking, paginated",
        description="Live, every paper that used it. With `run`, a closed run keeps only the papers that showed "
        "trouble with it (missing, errors in its definitions, weak), not those that merely loaded it.",
        parameters=[PackageParamsSerializer],
        responses={200: PackagePaperSerializer(many=True), **problems(400, 404)}, tags=["runs"],
    )  # fmt: skip
    def get(self, request: Request, corpus: str, service: str, kind: str, package: str) -> Response:
        query = params(PackageParamsSerializer, request)
        page = page_check(query.pop("offset", None), query.pop("page_size", None))
        source = package_source(pair_resolve(corpus, service), query.get("run"))
        papers = package_papers(source, kind_check(kind) or "", package, page)
        return Response(PackagePaperSerializer(papers, many=True).data)


class PackageDiffApi(PublicApiView):
    @extend_schema(
        operation_id="runs_package_diff", summary="Packages that gained or lost papers between two snapshots",
        description="`gained` and `lost` name the papers that showed trouble with the package in one snapshot "
        "and not the other; `previous_papers` and `current_papers` count every paper that used it.",
        parameters=[PackageDiffParamsSerializer],
        responses={200: PackageDiffSerializer, **problems(400, 404)}, tags=["runs"],
    )  # fmt: skip
    def get(self, request: Request, corpus: str, service: str) -> Response:
        query = params(PackageDiffParamsSerializer, request)
        page = page_check(query.pop("offset", None), query.pop("page_size", None))
        scope = diff_scope(pair_resolve(corpus, service), query.pop("previous", None), query.pop("current", None))
        return Response(PackageDiffSerializer(package_diff(scope, page)).data)


class PackageExportApi(PublicApiView):
    content_negotiation_class = FileNegotiation

    @extend_schema(
        operation_id="runs_package_export",
        summary="Every (package, paper) row of a ranking as CSV, streamed",
        description="Columns: kind, package, document, status, only_missing, clears, clears_weak, evidence "
        "(space-separated, strongest first). `run` reads a closed run as its snapshot froze it: the papers "
        "that showed trouble with each package.",
        parameters=[PackageParamsSerializer], tags=["runs"],
        responses={(200, "text/csv"): OpenApiResponse(OpenApiTypes.BINARY, description="CSV file"),
                   **problems(400, 404)},
    )  # fmt: skip
    def get(self, request: Request, corpus: str, service: str) -> StreamingHttpResponse:
        query = params(PackageParamsSerializer, request)
        source = package_source(pair_resolve(corpus, service), query.get("run"))
        response = StreamingHttpResponse(
            package_export_chunks(package_export(source), EXPORT_HEADER), content_type="text/csv; charset=utf-8"
        )
        name = f"{corpus}-{service}-packages" + (f"-run{source.run_id}" if source.run_id else "") + ".csv"
        response["Content-Disposition"] = content_disposition_header(True, name)
        response["X-Content-Type-Options"] = "nosniff"
        return response
