"""Reads of profile experiments (docs/decisions/profile-experiments.md): the list, and one experiment with its
variants ranked by the papers they fixed, then by those they broke, each with its progress.

The ranking is one grouped statement over the task tables: every task of the variants on the sandbox, joined
on the document's name to the pair's task of the same paper in the parent corpus, as it is now."""

# ruff: noqa: S608  (statements are fixed text and table names of the models; values are parameters)
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from django.db import connection

from config.errors import NotFound
from conversion.choices import COMPLETED, TaskStatus
from corpora.models import Document, Experiment, ExperimentVariant
from corpora.statuses import status_rank_sql
from corpora.tables import DOCUMENT_TABLE, TASK_TABLE
from jobs.models import Job

# The papers behind each number a detail lists, first by name; the numbers count them all.
PAPERS_SHOWN = 200
FIXED_FROM = (TaskStatus.ERROR, TaskStatus.FATAL)
FIXED_TO = (TaskStatus.NO_PROBLEM, TaskStatus.WARNING)


@dataclass(frozen=True)
class ExperimentRecord:
    """An experiment as listed (ExperimentSerializer)."""

    name: str
    corpus: str
    service: str
    sandbox: str | None
    actor: str
    created_at: datetime
    variants: list[str]
    job: str | None
    state: str | None


@dataclass(frozen=True)
class ExperimentPaper:
    """A paper behind a number: its name, and the sandbox (None once deleted) and the variant's service
    under which it has its document report (ExperimentPaperSerializer, which links it)."""

    name: str
    sandbox: str | None
    service: str


@dataclass(frozen=True)
class VariantResult:
    """A variant ranked (VariantResultSerializer): what it changed, its service and its progress, the papers
    it fixed (the pair's error or fatal -> no_problem or warning) and broke (worse than the pair's)."""

    rank: int
    name: str
    service: str
    changes: dict[str, Any]
    done: int
    total: int
    fixed: int
    broken: int
    fixed_papers: list[ExperimentPaper]
    broken_papers: list[ExperimentPaper]


@dataclass(frozen=True)
class ExperimentDetail:
    """One experiment (ExperimentDetailSerializer): its record, the pair's profile its variants change, its
    job's progress, and the variants ranked."""

    experiment: ExperimentRecord
    profile: dict[str, Any]
    progress_current: int | None
    progress_total: int | None
    message: str
    papers: int
    papers_shown: int
    variants: list[VariantResult]


def _record(experiment: Experiment, variants: list[str], job: Job | None) -> ExperimentRecord:
    return ExperimentRecord(
        name=experiment.name,
        corpus=experiment.corpus_name,
        service=experiment.service_name,
        sandbox=experiment.name if experiment.sandbox_id is not None else None,
        actor=experiment.actor,
        created_at=experiment.created_at,
        variants=variants,
        job=str(experiment.job_uuid) if experiment.job_uuid else None,
        state=job.state if job is not None else None,
    )


def experiment_records() -> list[ExperimentRecord]:
    """GET /api/experiments: every experiment, newest first, with its variants' names and its job's state."""
    experiments = list(Experiment.objects.all())
    names: dict[int, list[str]] = {}
    for experiment_id, name in ExperimentVariant.objects.order_by("id").values_list("experiment_id", "name"):
        names.setdefault(experiment_id, []).append(name)
    jobs: dict[UUID | None, Job] = {
        job.uuid: job for job in Job.objects.filter(uuid__in=[e.job_uuid for e in experiments if e.job_uuid])
    }
    return [_record(e, names.get(e.pk, []), jobs.get(e.job_uuid)) for e in experiments]


def experiment_get(name: str) -> Experiment:
    experiment = Experiment.objects.filter(name=name).first()
    if experiment is None:
        raise NotFound(f"No experiment named {name!r}.")
    return experiment


def experiment_detail(name: str, *, papers_shown: int = PAPERS_SHOWN) -> ExperimentDetail:
    """GET /api/experiments/{name}: the experiment with its variants ranked by papers fixed (more first), then
    papers broken (fewer first), then name."""
    experiment = experiment_get(name)
    variants = list(ExperimentVariant.objects.filter(experiment=experiment))
    job = Job.objects.filter(uuid=experiment.job_uuid).first() if experiment.job_uuid else None
    tallies = _variant_tallies(experiment, variants, papers_shown)
    sandbox = experiment.name if experiment.sandbox_id is not None else None
    results = []
    for variant in variants:
        total, done, fixed, broken, fixed_names, broken_names = tallies.get(variant.service_id, (0, 0, 0, 0, [], []))
        service = variant.service_name

        def papers(names: list[str], service: str = service) -> list[ExperimentPaper]:
            return [ExperimentPaper(n, sandbox, service) for n in names]

        result = VariantResult(
            rank=0, name=variant.name, service=service, changes=variant.changes, done=done, total=total,
            fixed=fixed, broken=broken, fixed_papers=papers(fixed_names), broken_papers=papers(broken_names),
        )  # fmt: skip
        results.append(result)
    results.sort(key=lambda r: (-r.fixed, r.broken, r.name))
    ranked = [VariantResult(**{**r.__dict__, "rank": rank}) for rank, r in enumerate(results, start=1)]
    return ExperimentDetail(
        experiment=_record(experiment, [v.name for v in variants], job),
        profile=experiment.profile,
        progress_current=job.progress_current if job else None,
        progress_total=job.progress_total if job else None,
        message=job.message if job else "",
        papers=Document.objects.filter(corpus_id=experiment.sandbox_id).count() if experiment.sandbox_id else 0,
        papers_shown=papers_shown,
        variants=ranked,
    )


def _variant_tallies(
    experiment: Experiment, variants: list[ExperimentVariant], papers_shown: int
) -> dict[int | None, tuple[int, int, int, int, list[str], list[str]]]:
    """Per variant service (keyed as the variants' nullable service_id, for their look-ups): its tasks on the
    sandbox, those done (a completed status), fixed and broken, and the first `papers_shown` names of the papers
    fixed and broken, in one grouped statement."""
    services = [v.service_id for v in variants if v.service_id is not None]
    if experiment.sandbox_id is None or not services:
        return {}
    fixed = f"p.status IN ({_codes(FIXED_FROM)}) AND v.status IN ({_codes(FIXED_TO)})"
    broken = f"{status_rank_sql('v.status')} > {status_rank_sql('p.status')}"
    done = f"v.status IN ({_codes(COMPLETED)})"
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            SELECT j.service_id, count(*), count(*) FILTER (WHERE j.done),
                   count(*) FILTER (WHERE j.fixed), count(*) FILTER (WHERE j.broken),
                   (array_agg(j.name ORDER BY j.name) FILTER (WHERE j.fixed))[1:%s],
                   (array_agg(j.name ORDER BY j.name) FILTER (WHERE j.broken))[1:%s]
              FROM (SELECT v.service_id, sd.name, {done} AS done, coalesce({fixed}, false) AS fixed,
                           coalesce({broken}, false) AS broken
                      FROM {TASK_TABLE} v
                      JOIN {DOCUMENT_TABLE} sd ON sd.id = v.document_id
                      LEFT JOIN {DOCUMENT_TABLE} pd ON pd.corpus_id = %s AND pd.name = sd.name
                      LEFT JOIN {TASK_TABLE} p ON p.service_id = %s AND p.document_id = pd.id
                     WHERE v.corpus_id = %s AND v.service_id = ANY(%s)) j
             GROUP BY j.service_id
            """,
            [papers_shown, papers_shown, experiment.corpus_id, experiment.service_id, experiment.sandbox_id, services],
        )
        return {row[0]: (row[1], row[2], row[3], row[4], row[5] or [], row[6] or []) for row in cursor.fetchall()}


def _codes(statuses: tuple[TaskStatus, ...]) -> str:
    return ", ".join(str(int(status)) for status in statuses)
