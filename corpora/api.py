"""API of corpora: list, import, detail, delete, extend, activate and deactivate services, a pair's
documents, sandboxes, dataset exports and profile experiments."""

from __future__ import annotations

from django.http import FileResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response

from accounts.api_base import PublicApiView, PublicReadApiView, TokenApiView
from config.api.deletions import RESULT_FILES_HEADERS, ConfirmSerializer, result_files_headers
from config.api.paging import page_check
from config.api.schema import problems
from corpora.actions import corpora as actions
from corpora.experiments.actions import experiment_start
from corpora.experiments.queries import experiment_detail, experiment_records
from corpora.experiments.serializers import (
    ExperimentDetailSerializer,
    ExperimentRequestSerializer,
    ExperimentSerializer,
)
from corpora.export.actions import dataset_export
from corpora.export.queries import export_file, export_summaries
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
from jobs.serializers import JobSerializer

CONFIRM = OpenApiParameter("confirm", str, required=False, description="must equal the name being deleted")


class CorpusListApi(PublicReadApiView):
    @extend_schema(
        operation_id="corpora_list",
        summary="List corpora with their activated services",
        responses={200: CorpusSerializer(many=True)},
        tags=["corpora"],
    )
    def get(self, request: Request) -> Response:
        return Response(CorpusSerializer(corpus_records(), many=True).data)

    @extend_schema(
        operation_id="corpora_import",
        summary="Import a corpus from a server directory (background job)",
        request=ImportRequestSerializer,
        responses={202: JobSerializer, **problems(400, 409, 422)},
        tags=["corpora"],
    )
    def post(self, request: Request) -> Response:
        job = actions.corpus_import(actor=self.actor_name(), submitted=ImportRequestSerializer(data=request.data))
        return Response(JobSerializer(job).data, status=status.HTTP_202_ACCEPTED)


class CorpusDetailApi(PublicReadApiView):
    @extend_schema(
        operation_id="corpora_retrieve",
        summary="One corpus: activated services and per-service status counts",
        responses={200: CorpusDetailSerializer, **problems(404)},
        tags=["corpora"],
    )
    def get(self, request: Request, name: str) -> Response:
        return Response(CorpusDetailSerializer(corpus_detail(name)).data)

    @extend_schema(
        operation_id="corpora_destroy",
        summary="Delete a corpus with all its documents, tasks, log messages and result archives (confirm=name)",
        parameters=[CONFIRM, *RESULT_FILES_HEADERS],
        responses={204: None, **problems(400, 404)},
        tags=["corpora"],
    )
    def delete(self, request: Request, name: str) -> Response:
        counts = actions.corpus_delete(
            name=name, actor=self.actor_name(), submitted=ConfirmSerializer(data=request.query_params)
        )
        return Response(status=status.HTTP_204_NO_CONTENT, headers=result_files_headers(counts))


class CorpusExtendApi(TokenApiView):
    @extend_schema(
        operation_id="corpora_extend",
        summary="Add the entries that arrived in the corpus directory since the import (background job)",
        request=None,
        responses={202: JobSerializer, **problems(404, 409)},
        tags=["corpora"],
    )
    def post(self, request: Request, name: str) -> Response:
        job = actions.corpus_extend(name=name, actor=self.actor_name())
        return Response(JobSerializer(job).data, status=status.HTTP_202_ACCEPTED)


class ActivationApi(TokenApiView):
    @extend_schema(
        operation_id="corpora_service_activate",
        summary="Activate a service on a corpus: one TODO task per document (background job)",
        request=None,
        responses={202: JobSerializer, **problems(404, 409)},
        tags=["corpora"],
    )
    def post(self, request: Request, corpus: str, service: str) -> Response:
        job = actions.service_activate(corpus_name=corpus, service_name=service, actor=self.actor_name())
        return Response(JobSerializer(job).data, status=status.HTTP_202_ACCEPTED)

    @extend_schema(
        operation_id="corpora_service_deactivate",
        summary="Deactivate a service on a corpus: delete that pair's tasks, messages and results (confirm=service)",
        parameters=[CONFIRM, *RESULT_FILES_HEADERS],
        responses={204: None, **problems(400, 404)},
        tags=["corpora"],
    )
    def delete(self, request: Request, corpus: str, service: str) -> Response:
        counts = actions.service_deactivate(
            corpus_name=corpus, service_name=service, actor=self.actor_name(),
            submitted=ConfirmSerializer(data=request.query_params),
        )  # fmt: skip
        return Response(status=status.HTTP_204_NO_CONTENT, headers=result_files_headers(counts))


class DocumentListApi(PublicApiView):
    @extend_schema(
        operation_id="corpora_documents",
        summary="A pair's documents by name with their status and whether they have HTML, paginated; "
        "narrowed to a status and to a name prefix",
        parameters=[DocumentListParamsSerializer],
        responses={200: DocumentListSerializer, **problems(400, 404)},
        tags=["corpora"],
    )
    def get(self, request: Request, corpus: str, service: str) -> Response:
        params = DocumentListParamsSerializer(data=request.query_params)
        params.is_valid(raise_exception=True)
        query = params.validated_data
        page = page_check(query.get("offset"), query.get("page_size"))
        documents = document_list(
            pair_resolve(corpus, service), status=query.get("status"), name_prefix=query.get("name_prefix"), page=page
        )
        return Response(DocumentListSerializer(documents).data)


# --- dataset export -------------------------------------------------------------------------------


class DatasetExportApi(TokenApiView):
    @extend_schema(
        operation_id="corpora_export_dataset",
        summary="Write ZIP archives of the pair's converted results and a manifest under EXPORT_ROOT (background job)",
        request=ExportRequestSerializer,
        responses={202: JobSerializer, **problems(400, 404, 409, 422)},
        tags=["corpora"],
    )
    def post(self, request: Request, corpus: str, service: str) -> Response:
        job = dataset_export(
            corpus=corpus,
            service=service,
            actor=self.actor_name(),
            submitted=ExportRequestSerializer(data=request.data),
        )
        return Response(JobSerializer(job).data, status=status.HTTP_202_ACCEPTED)


class ExportListApi(TokenApiView):
    @extend_schema(
        operation_id="exports_list",
        summary="Finished dataset exports with their manifests (without document lists) and download links",
        responses={200: ExportSerializer(many=True)},
        tags=["corpora"],
    )
    def get(self, request: Request) -> Response:
        return Response(ExportSerializer(export_summaries(), many=True).data)


class ExportFileApi(TokenApiView):
    @extend_schema(
        operation_id="exports_file",
        summary="Download an archive (or manifest.json) of a finished dataset export",
        responses={(200, "application/octet-stream"): OpenApiTypes.BINARY, **problems(404)},
        tags=["corpora"],
    )
    def get(self, request: Request, out: str, name: str) -> FileResponse:
        path = export_file(out, name)
        return FileResponse(path.open("rb"), as_attachment=True, filename=name)


# --- sandbox corpora ------------------------------------------------------------------------------


class SandboxApi(TokenApiView):
    @extend_schema(
        operation_id="corpora_sandbox",
        summary="Carve a sandbox corpus from the parent's documents that match a condition (background job)",
        request=SandboxRequestSerializer,
        responses={202: JobSerializer, **problems(400, 404, 409)},
        tags=["corpora"],
    )
    def post(self, request: Request, parent: str) -> Response:
        job = actions.corpus_sandbox(
            parent=parent, actor=self.actor_name(), submitted=SandboxRequestSerializer(data=request.data)
        )
        return Response(JobSerializer(job).data, status=status.HTTP_202_ACCEPTED)


# --- profile experiments --------------------------------------------------------------------------


class ExperimentListApi(PublicReadApiView):
    @extend_schema(
        operation_id="experiments_list",
        summary="List profile experiments, newest first, with their variants and their job's state",
        responses={200: ExperimentSerializer(many=True)},
        tags=["experiments"],
    )
    def get(self, request: Request) -> Response:
        return Response(ExperimentSerializer(experiment_records(), many=True).data)

    @extend_schema(
        operation_id="experiments_start",
        summary="Start a profile experiment: carve the pair's papers with status error or fatal into a sandbox,"
        " register a service per variant and activate each on it (background job)",
        request=ExperimentRequestSerializer,
        responses={202: JobSerializer, **problems(400, 404, 409)},
        tags=["experiments"],
    )
    def post(self, request: Request) -> Response:
        job = experiment_start(actor=self.actor_name(), submitted=ExperimentRequestSerializer(data=request.data))
        return Response(JobSerializer(job).data, status=status.HTTP_202_ACCEPTED)


class ExperimentDetailApi(PublicReadApiView):
    @extend_schema(
        operation_id="experiments_retrieve",
        summary="One profile experiment: its variants ranked by papers fixed, then papers broken, with the"
        " papers behind each number and each variant's progress",
        responses={200: ExperimentDetailSerializer, **problems(404)},
        tags=["experiments"],
    )
    def get(self, request: Request, name: str) -> Response:
        return Response(ExperimentDetailSerializer(experiment_detail(name)).data)
