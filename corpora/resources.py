"""The API endpoints of corpora, declared (config.resources): list, import, detail, delete, extend,
activate and deactivate services, a pair's documents, sandboxes, dataset exports and profile
experiments."""

from __future__ import annotations

from functools import partial
from typing import Any

from django.http import FileResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter
from rest_framework import status

from accounts.api_base import PublicApiView, PublicReadApiView
from config.api.deletions import RESULT_FILES_HEADERS, ConfirmSerializer, result_files_headers
from config.api.paging import page_check
from config.api.schema import problems
from config.resources import Action, Read
from corpora import serializers as s
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
from jobs.serializers import JobSerializer

CONFIRM = OpenApiParameter("confirm", str, required=False, description="must equal the name being deleted")

CorporaRead = partial(Read, tag="corpora")
# A write that starts a background job and answers it (202).
JobAction = partial(Action, method="post", tag="corpora", answer=JobSerializer, status=status.HTTP_202_ACCEPTED)
# A deletion checked by `confirm`, answering how many result files it removed.
Deletion = partial(
    Action, method="delete", tag="corpora", parameters=(CONFIRM, *RESULT_FILES_HEADERS),
    status=status.HTTP_204_NO_CONTENT, problems=(400, 404), headers=result_files_headers,
)  # fmt: skip

CORPUS = "corpora/<str:name>"
PAIR = "corpora/<str:corpus>/services/<str:service>"


def _documents(query: dict[str, Any], corpus: str, service: str) -> Any:
    page = page_check(query.get("offset"), query.get("page_size"))
    return document_list(
        pair_resolve(corpus, service), status=query.get("status"), name_prefix=query.get("name_prefix"), page=page
    )


def _export_file(view: Any, request: Any, out: str, name: str) -> FileResponse:
    return FileResponse(export_file(out, name).open("rb"), as_attachment=True, filename=name)


corpus_list = CorporaRead(
    route="corpora", name="api-corpora", access=PublicReadApiView,
    operation_id="corpora_list", summary="List corpora with their activated services",
    answer=s.CorpusSerializer, many=True, problems=(), fetch=lambda query: corpus_records(),
)  # fmt: skip
corpus_import = JobAction(
    route="corpora", name="api-corpora",
    operation_id="corpora_import", summary="Import a corpus from a server directory (background job)",
    request=s.ImportRequestSerializer, problems=(400, 409, 422),
    act=lambda view, request: actions.corpus_import(
        actor=view.actor_name(), submitted=s.ImportRequestSerializer(data=request.data)
    ),
)  # fmt: skip
corpus = CorporaRead(
    route=CORPUS, name="api-corpus", access=PublicReadApiView,
    operation_id="corpora_retrieve", summary="One corpus: activated services and per-service status counts",
    answer=s.CorpusDetailSerializer, fetch=lambda query, name: corpus_detail(name),
)  # fmt: skip
corpus_delete = Deletion(
    route=CORPUS, name="api-corpus",
    operation_id="corpora_destroy",
    summary="Delete a corpus with all its documents, tasks, log messages and result archives (confirm=name)",
    act=lambda view, request, name: actions.corpus_delete(
        name=name, actor=view.actor_name(), submitted=ConfirmSerializer(data=request.query_params)
    ),
)  # fmt: skip
corpus_extend = JobAction(
    route=f"{CORPUS}/extend", name="api-corpus-extend",
    operation_id="corpora_extend",
    summary="Add the entries that arrived in the corpus directory since the import (background job)",
    problems=(404, 409), act=lambda view, request, name: actions.corpus_extend(name=name, actor=view.actor_name()),
)  # fmt: skip
activation = JobAction(
    route=PAIR, name="api-activation",
    operation_id="corpora_service_activate",
    summary="Activate a service on a corpus: one TODO task per document (background job)",
    problems=(404, 409),
    act=lambda view, request, corpus, service: actions.service_activate(
        corpus_name=corpus, service_name=service, actor=view.actor_name()
    ),
)  # fmt: skip
deactivation = Deletion(
    route=PAIR, name="api-activation",
    operation_id="corpora_service_deactivate",
    summary="Deactivate a service on a corpus: delete that pair's tasks, messages and results (confirm=service)",
    act=lambda view, request, corpus, service: actions.service_deactivate(
        corpus_name=corpus, service_name=service, actor=view.actor_name(),
        submitted=ConfirmSerializer(data=request.query_params),
    ),
)  # fmt: skip
documents = CorporaRead(
    route=f"{PAIR}/documents", name="api-documents", access=PublicApiView,
    operation_id="corpora_documents",
    summary="A pair's documents by name with their status and whether they have HTML, paginated; "
    "narrowed to a status and to a name prefix",
    params=s.DocumentListParamsSerializer, answer=s.DocumentListSerializer, problems=(400, 404), fetch=_documents,
)  # fmt: skip

# --- sandbox corpora ---
sandbox = JobAction(
    route="corpora/<str:parent>/sandbox", name="api-corpus-sandbox",
    operation_id="corpora_sandbox",
    summary="Carve a sandbox corpus from the parent's documents that match a condition (background job)",
    request=s.SandboxRequestSerializer, problems=(400, 404, 409),
    act=lambda view, request, parent: actions.corpus_sandbox(
        parent=parent, actor=view.actor_name(), submitted=s.SandboxRequestSerializer(data=request.data)
    ),
)  # fmt: skip

# --- dataset export ---
export_dataset = JobAction(
    route=f"{PAIR}/export-dataset", name="api-export-dataset",
    operation_id="corpora_export_dataset",
    summary="Write ZIP archives of the pair's converted results and a manifest under EXPORT_ROOT (background job)",
    request=s.ExportRequestSerializer, problems=(400, 404, 409, 422),
    act=lambda view, request, corpus, service: dataset_export(
        corpus=corpus, service=service, actor=view.actor_name(), submitted=s.ExportRequestSerializer(data=request.data)
    ),
)  # fmt: skip
exports = CorporaRead(
    route="exports", name="api-exports",
    operation_id="exports_list",
    summary="Finished dataset exports with their manifests (without document lists) and download links",
    answer=s.ExportSerializer, many=True, problems=(), fetch=lambda query: export_summaries(),
)  # fmt: skip
export_file_read = Action(
    route="exports/<str:out>/<str:name>", name="api-export-file", method="get", tag="corpora",
    operation_id="exports_file", summary="Download an archive (or manifest.json) of a finished dataset export",
    responses={(200, "application/octet-stream"): OpenApiTypes.BINARY, **problems(404)}, act=_export_file,
)  # fmt: skip

# --- profile experiments ---
experiments = Read(
    route="experiments", name="api-experiments", access=PublicReadApiView, tag="experiments",
    operation_id="experiments_list",
    summary="List profile experiments, newest first, with their variants and their job's state",
    answer=ExperimentSerializer, many=True, problems=(), fetch=lambda query: experiment_records(),
)  # fmt: skip
experiment_start_action = JobAction(
    route="experiments", name="api-experiments", tag="experiments",
    operation_id="experiments_start",
    summary="Start a profile experiment: carve the pair's papers with status error or fatal into a sandbox,"
    " register a service per variant and activate each on it (background job)",
    request=ExperimentRequestSerializer, problems=(400, 404, 409),
    act=lambda view, request: experiment_start(
        actor=view.actor_name(), submitted=ExperimentRequestSerializer(data=request.data)
    ),
)  # fmt: skip
experiment = Read(
    route="experiments/<str:name>", name="api-experiment", access=PublicReadApiView, tag="experiments",
    operation_id="experiments_retrieve",
    summary="One profile experiment: its variants ranked by papers fixed, then papers broken, with the"
    " papers behind each number and each variant's progress",
    answer=ExperimentDetailSerializer, fetch=lambda query, name: experiment_detail(name),
)  # fmt: skip
