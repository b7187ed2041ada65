"""API of runs: history, the open run, snapshots, diffs of two snapshots and their task lists, the message
classes that changed between two snapshots and their documents, a document's history, and the comparison
of two services on one corpus. The reads are declared in runs.reads, which the screens share; runs.urls
gives each its API view (config.resources.resource_paths)."""

from __future__ import annotations

from django.http import JsonResponse, StreamingHttpResponse
from django.utils.http import content_disposition_header
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response

from accounts.api_base import PublicApiView, TokenApiView
from config.api.negotiation import FileNegotiation
from config.api.schema import problems
from corpora.actions.history import snapshot_append
from corpora.queries.corpora import pair_resolve
from corpora.queries.history import run_current
from corpora.queries.packages import EXPORT_HEADER, package_export, package_source
from runs import reads
from runs.serializers import CurrentRunSerializer, PackageParamsSerializer, SnapshotAckSerializer, package_export_chunks

# The CurrentRun component (a Run with its ETA) or null.
NULLABLE_RUN = {"allOf": [{"$ref": "#/components/schemas/CurrentRun"}], "nullable": True}


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


class SnapshotApi(TokenApiView):
    @extend_schema(
        operation_id="runs_snapshot", summary="Append the pair's current task statuses as one snapshot (202)",
        request=None, responses={202: SnapshotAckSerializer, **problems(404)}, tags=["runs"],
    )  # fmt: skip
    def post(self, request: Request, corpus: str, service: str) -> Response:
        ack = snapshot_append(corpus_name=corpus, service_name=service, actor=self.actor_name())
        return Response(SnapshotAckSerializer(ack).data, status=status.HTTP_202_ACCEPTED)


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
        query = reads.packages.query(request.query_params)
        source = package_source(pair_resolve(corpus, service), query.get("run"))
        response = StreamingHttpResponse(
            package_export_chunks(package_export(source), EXPORT_HEADER), content_type="text/csv; charset=utf-8"
        )
        name = f"{corpus}-{service}-packages" + (f"-run{source.run_id}" if source.run_id else "") + ".csv"
        response["Content-Disposition"] = content_disposition_header(True, name)
        response["X-Content-Type-Options"] = "nosniff"
        return response
