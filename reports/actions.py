"""Writes on conversions: pause and resume, per (corpus, service) or fleet-wide."""

from __future__ import annotations

from typing import Any

from django.db import connection, transaction

from config.errors import BadRequest
from corpora.lifecycle import grains_clear, tasks_pause, tasks_rerun, tasks_resume
from corpora.queries import corpus_get
from corpora.statuses import COMPLETED
from services.queries import service_get


def conversions_pause(*, corpus_name: str | None = None, service_name: str | None = None) -> int:
    """Block every task in progress (TODO or leased) of a pair, or of all pairs; the dispatcher stops
    handing them out and discards results that still come back for them. Returns how many."""
    return tasks_pause(**_pair_ids(corpus_name, service_name))


def conversions_resume(*, corpus_name: str | None = None, service_name: str | None = None) -> int:
    """Put every blocked task of a pair, or of all pairs, back to TODO. Returns how many."""
    return tasks_resume(**_pair_ids(corpus_name, service_name))


def _pair_ids(corpus_name: str | None, service_name: str | None) -> dict[str, int | None]:
    """The ids of a named pair, or none for every pair (both names None)."""
    if corpus_name is None:
        return {"corpus_id": None, "service_id": None}
    return {"corpus_id": corpus_get(corpus_name).pk, "service_id": service_get(service_name).pk}


# --- grains: clear, rebuild ------------------------------------------------------------------------


def pair_refresh(*, corpus_name: str, service_name: str) -> dict:
    """The scope refresh: clear this pair's grains at once (no job)."""
    corpus, service = corpus_get(corpus_name), service_get(service_name)
    return {"corpus": corpus.name, "service": service.name, "cleared_slices": grains_clear([(corpus.pk, service.pk)])}


def slice_build_enqueue(*, corpus_id: int, service_id: int, severity: str) -> None:
    """Start a background build of one slice unless one is already queued or running."""
    from jobs.actions import job_enqueue
    from jobs.models import ACTIVE_STATES, Job

    params = {"corpus_id": corpus_id, "service_id": service_id, "severity": severity}
    if not Job.objects.filter(kind="report_slice_build", state__in=ACTIVE_STATES, params=params).exists():
        job_enqueue(kind="report_slice_build", actor="reports", params=params)


def reports_rebuild_all(*, progress: Any, log: Any) -> dict[str, int]:
    """The global refresh: rebuild every slice of every (corpus, service) pair that has messages."""
    from reports.queries import SEVERITIES, grain_slice_rebuild

    with connection.cursor() as cursor:
        cursor.execute("SELECT DISTINCT corpus_id, service_id FROM corpora_taskcount WHERE count > 0")
        pairs = cursor.fetchall()
    total = len(pairs) * len(SEVERITIES)
    done = rows = 0
    progress(0, total, "rebuilding report grains")
    for corpus_id, service_id in pairs:
        for severity in SEVERITIES:
            rows += grain_slice_rebuild(corpus_id, service_id, severity)
            done += 1
            progress(done, total, f"corpus {corpus_id} service {service_id} {severity}")
    log(f"rebuilt {done} slices ({rows} grain rows) for {len(pairs)} pairs")
    return {"pairs": len(pairs), "slices": done, "rows": rows}


# --- rerun ---------------------------------------------------------------------------------------


def rerun(
    *,
    corpus_name: str,
    service_name: str,
    actor: str,
    severity: str | None = None,
    category: str | None = None,
    what: str | None = None,
    description: str = "",
) -> dict[str, Any]:
    """Mark a slice for reprocessing in one transaction: open a new run, delete the old messages and
    runtimes of the tasks in scope, set them TODO, and clear the pair's grains."""
    from reports.queries import BULK_SETTINGS, severity_check
    from runs.actions import run_open

    corpus, service = corpus_get(corpus_name), service_get(service_name)
    if severity is None and (category or what):
        raise BadRequest("category and what narrow a severity: pass severity too.", errors={"severity": ["required"]})
    if what and not category:
        raise BadRequest("what narrows a category: pass category too.", errors={"category": ["required"]})
    if severity is not None:
        statuses, message_severity = severity_check(severity)
    else:
        statuses, message_severity = COMPLETED, None
    with transaction.atomic():
        count = tasks_rerun(
            corpus_id=corpus.pk, service_id=service.pk, statuses=statuses, message_severity=message_severity,
            category=category, what=what, bulk_settings=BULK_SETTINGS,
        )  # fmt: skip
        run = run_open(corpus_id=corpus.pk, service_id=service.pk, owner=actor, description=description)
        grains_clear([(corpus.pk, service.pk)])
    return {
        "corpus": corpus.name, "service": service.name, "severity": severity, "category": category, "what": what,
        "tasks": count, "run_id": run.pk,
    }  # fmt: skip
