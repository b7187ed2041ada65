"""Job kinds of the corpora app: import, extend, activation. Each is one action call, its typed answer
stored as the job's result document.

Import, sandbox and activation are not run again whole after a transient database error: on a failure
they remove what they half made (the corpus, the activation). They, and extend, which shares the import's
scan, retry the transaction that writes instead (corpora/actions/corpora.py). Removing files and writing an export
(which keeps the archives already whole) are safe to run again whole."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from corpora import results
from corpora.actions import corpora as actions
from corpora.experiments.actions import experiment_run
from corpora.export.job import dataset_export_run
from jobs.choices import JobKinds
from jobs.registry import job_kind
from jobs.runner import JobContext


@job_kind(JobKinds.CORPUS_IMPORT)
def corpus_import_job(ctx: JobContext, *, corpus_id: int, **_: Any) -> dict[str, Any]:
    """Import a corpus directory: one document and one import task per entry."""
    return asdict(actions.corpus_import_run(corpus_id=corpus_id, progress=ctx.progress, log=ctx.log))


@job_kind(JobKinds.CORPUS_EXTEND)
def corpus_extend_job(ctx: JobContext, *, corpus_id: int, **_: Any) -> dict[str, Any]:
    """Add the entries that arrived since the import, with TODO tasks on every activated service."""
    return asdict(
        actions.corpus_extend_run(corpus_id=corpus_id, progress=ctx.progress, log=ctx.log, actor=ctx.job.actor)
    )


@job_kind(JobKinds.SERVICE_ACTIVATE)
def service_activate_job(ctx: JobContext, *, activation_id: int, **_: Any) -> dict[str, Any]:
    """Create one TODO task per valid document for a newly activated service and open a run."""
    return asdict(actions.service_activate_run(activation_id=activation_id, progress=ctx.progress, log=ctx.log))


@job_kind(JobKinds.RESULTS_REMOVE, rerun=True)
def results_remove_job(ctx: JobContext, *, names: list[str], **_: Any) -> dict[str, Any]:
    """Remove the result archives of a deleted corpus, service or pair (moved aside at the deletion)."""
    return {"files_removed": results.discarded_remove(names=names, progress=ctx.progress)}


# --- dataset export -------------------------------------------------------------------------------


@job_kind(JobKinds.DATASET_EXPORT, rerun=True)
def dataset_export_job(
    ctx: JobContext, *, corpus: str, service: str, corpus_id: int, service_id: int, group_by: str,
    severities: list[str], out: str, **_: Any,
) -> dict[str, Any]:  # fmt: skip
    """Write ZIP archives of a pair's converted results and their manifest under EXPORT_ROOT."""
    return dataset_export_run(
        corpus=corpus, service=service, corpus_id=corpus_id, service_id=service_id, group_by=group_by,
        severities=severities, out=out, progress=ctx.progress, log=ctx.log,
    )  # fmt: skip


# --- sandbox corpora ------------------------------------------------------------------------------


@job_kind(JobKinds.CORPUS_SANDBOX)
def corpus_sandbox_job(ctx: JobContext, *, corpus_id: int, **_: Any) -> dict[str, Any]:
    """Carve a sandbox: the parent's matching documents and one import task each."""
    return asdict(actions.corpus_sandbox_run(corpus_id=corpus_id, progress=ctx.progress, log=ctx.log))


# --- profile experiments --------------------------------------------------------------------------


@job_kind(JobKinds.EXPERIMENT_RUN)
def experiment_run_job(ctx: JobContext, *, experiment_id: int, **_: Any) -> dict[str, Any]:
    """Carve an experiment's sandbox and activate each of its variants on it."""
    return asdict(experiment_run(experiment_id=experiment_id, progress=ctx.progress, log=ctx.log))
