"""Writes of dataset exports: a request checked before any job starts, then its `dataset_export` job
enqueued (corpora.export.job is its body)."""

from __future__ import annotations

from typing import Any

from django.utils import timezone

from accounts.actions import journaled
from accounts.choices import Action
from config.errors import Conflict, NotFound, Unprocessable
from corpora.choices import ExportGrouping
from corpora.export.queries import EXPORT_SEVERITIES, export_dir_check, plan_read
from corpora.models import Activation
from corpora.queries.corpora import corpus_get
from jobs.actions import job_enqueue
from jobs.choices import JobKinds
from jobs.models import Job
from services.queries import service_get


def export_request_check(
    *, corpus: str, service: str, group_by: str, severities: list[str], out: str | None
) -> dict[str, Any]:
    """Everything a request can get wrong, checked before any job starts; the job's params."""
    corpus_row, service_row = corpus_get(corpus), service_get(service)
    if not Activation.objects.filter(corpus=corpus_row, service=service_row).exists():
        raise NotFound(f"The service {service!r} is not active on the corpus {corpus!r}.")
    problems: dict[str, list[str]] = {}
    if group_by not in ExportGrouping.values:
        problems["group_by"] = [f"one of {', '.join(ExportGrouping.values)}"]
    unknown = [key for key in severities if key not in EXPORT_SEVERITIES]
    if unknown or not severities:
        problems["severities"] = [f"a non-empty list of {', '.join(EXPORT_SEVERITIES)}"]
    if problems:
        raise Unprocessable("The export request has invalid fields.", errors=problems)
    out = out or f"{corpus}-{service}-{timezone.now():%Y%m%dT%H%M%S%fZ}"
    directory = export_dir_check(out)
    request = {
        "corpus": corpus,
        "service": service,
        "group_by": group_by,
        "severities": [key for key in EXPORT_SEVERITIES if key in severities],
    }
    existing = plan_read(directory)
    if existing is not None and existing["request"] != request:
        raise Conflict(f"The export directory {out!r} holds an export of another request; choose another out.")
    return {**request, "out": out, "corpus_id": corpus_row.pk, "service_id": service_row.pk}


@journaled(Action.CORPUS_EXPORT, target="{corpus}/{service}")
def dataset_export(
    *, corpus: str, service: str, group_by: str, severities: list[str], actor: str, out: str | None = None,
    send: bool = True,
) -> Job:  # fmt: skip
    """Check the request and enqueue the export job (202 with its record)."""
    params = export_request_check(corpus=corpus, service=service, group_by=group_by, severities=severities, out=out)
    job, _ = job_enqueue(kind=JobKinds.DATASET_EXPORT, actor=actor, params=params, send=send)
    return job
