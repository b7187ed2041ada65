"""Reads of the comparison of two services on one corpus: their current tasks joined on the document,
kept nowhere, beside how each service converts (its profile, and its latest run's engine versions)."""

# ruff: noqa: S608  (statements are fixed text and status constants; values are parameters)
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db import connection, transaction

from config.api.paging import Page
from config.errors import BadRequest, NotFound
from config.planner import BULK_SETTINGS
from conversion.profiles import preset_of, profile_load
from corpora.models import Corpus, TaskCount
from corpora.queries.corpora import Pair, corpus_get
from corpora.queries.diffs import status_filter
from corpora.queries.history import RunProfile, run_latest
from corpora.statuses import ABSENT_BUCKET, DIFF_BUCKET_NAMES, regressed
from corpora.tables import DOCUMENT_TABLE, TASK_TABLE
from services.choices import ProtectedService
from services.models import Service
from services.queries import service_get


@dataclass(frozen=True)
class ComparePair:
    corpus: Corpus
    service_a: Service
    service_b: Service


def compare_scope(corpus_name: str, service_a: str, service_b: str) -> ComparePair:
    corpus, a, b = corpus_get(corpus_name), service_get(service_a), service_get(service_b)
    if a.pk == b.pk:
        raise BadRequest("Compare two different services.", errors={"service_b": ["same as service_a"]})
    for service in (a, b):
        if not TaskCount.objects.filter(corpus=corpus, service=service, count__gt=0).exists():
            raise NotFound(f"The service {service.name!r} has no tasks on the corpus {corpus_name!r}.")
    return ComparePair(corpus, a, b)


def comparable_services(pair: Pair) -> list[str]:
    """The other converters with tasks on the corpus, by name: what the service can be compared with."""
    names = (
        TaskCount.objects.filter(corpus_id=pair.corpus_id, count__gt=0)
        .exclude(service_id=pair.service_id)
        .exclude(service__name__in=ProtectedService.values)
        .values_list("service__name", flat=True)
        .distinct()
    )
    return sorted(names)


def _compare_join() -> str:
    """Each document of the corpus with its status bucket under A and under B (ABSENT_BUCKET where a
    service has no task for it), joined in document order on the (service, document) key."""
    return (
        "SELECT coalesce(a.document_id, b.document_id) AS document_id,"
        f" coalesce(ccs_status_bucket(a.status), {ABSENT_BUCKET}) AS status_a,"
        f" coalesce(ccs_status_bucket(b.status), {ABSENT_BUCKET}) AS status_b"
        f" FROM (SELECT document_id, status FROM {TASK_TABLE} WHERE service_id = %s AND corpus_id = %s) a"
        f" FULL JOIN (SELECT document_id, status FROM {TASK_TABLE} WHERE service_id = %s AND corpus_id = %s) b"
        " ON a.document_id = b.document_id"
    )


def _compare_params(scope: ComparePair) -> list[int]:
    return [scope.service_a.pk, scope.corpus.pk, scope.service_b.pk, scope.corpus.pk]


@dataclass(frozen=True)
class CompareCell:
    """The documents with one status under A and one under B (CompareCellSerializer)."""

    status_a: str
    status_b: str
    count: int
    regression: bool


@dataclass(frozen=True)
class CompareSide:
    """How a compared service converts: its profile now and its latest run on the corpus
    (CompareSideSerializer)."""

    service: str
    engine: str
    profile: dict[str, Any]
    profile_hash: str
    profile_preset: str | None
    run: RunProfile | None


@dataclass(frozen=True)
class CompareMatrix:
    """Two services on one corpus: A's status x B's status over every document (CompareSerializer)."""

    corpus: str
    service_a: str
    service_b: str
    total: int
    differ: int
    regressions: int
    matrix: list[CompareCell]
    profile_a: CompareSide
    profile_b: CompareSide


@dataclass(frozen=True)
class CompareTask:
    """A document of a corpus on which A and B differ (CompareTaskSerializer, which links both its reports)."""

    corpus: str
    service_a: str
    service_b: str
    document: str
    status_a: str
    status_b: str
    regression: bool


def compare_matrix(scope: ComparePair) -> CompareMatrix:
    """GET /api/compare/{corpus}/{a}/{b}: A's status x B's status -> documents, over the corpus now."""
    with transaction.atomic(), connection.cursor() as cursor:
        for statement in BULK_SETTINGS:  # the hash join of two million-task services stays in memory
            cursor.execute(statement)
        cursor.execute(
            f"SELECT status_a, status_b, count(*) FROM ({_compare_join()}) j GROUP BY 1, 2 ORDER BY 1 DESC, 2 DESC",
            _compare_params(scope),
        )
        rows = cursor.fetchall()
    matrix = [
        CompareCell(
            DIFF_BUCKET_NAMES[a], DIFF_BUCKET_NAMES[b], n, regressed(DIFF_BUCKET_NAMES[a], DIFF_BUCKET_NAMES[b])
        )
        for a, b, n in rows
    ]
    return CompareMatrix(
        corpus=scope.corpus.name,
        service_a=scope.service_a.name,
        service_b=scope.service_b.name,
        total=sum(cell.count for cell in matrix),
        differ=sum(cell.count for cell in matrix if cell.status_a != cell.status_b),
        regressions=sum(cell.count for cell in matrix if cell.regression),
        matrix=matrix,
        profile_a=compare_side(scope.corpus, scope.service_a),
        profile_b=compare_side(scope.corpus, scope.service_b),
    )


def compare_side(corpus: Corpus, service: Service) -> CompareSide:
    """How a compared service converts: its profile now, and its latest run on the corpus with the profile,
    engine and versions of that run."""
    profile = profile_load(service.profile)
    return CompareSide(
        service=service.name,
        engine=profile.engine,
        profile=profile.as_json(),
        profile_hash=profile.digest,
        profile_preset=preset_of(profile),
        run=run_latest(corpus.pk, service.pk),
    )


def _transition_where(previous: int | None, current: int | None, change: str | None) -> tuple[str, list[Any]]:
    clauses, params = [], []
    if previous is not None:
        clauses.append("previous_status = %s")
        params.append(previous)
    if current is not None:
        clauses.append("current_status = %s")
        params.append(current)
    if change == "regressed":
        names = DIFF_BUCKET_NAMES.items()
        pairs = [(p, c) for p, p_name in names for c, c_name in names if regressed(p_name, c_name)]
        clauses.append("(previous_status, current_status) IN (" + ", ".join(["(%s, %s)"] * len(pairs)) + ")")
        params.extend(v for pair in pairs for v in pair)
    return "".join(f" AND {clause}" for clause in clauses), params


def compare_tasks(
    scope: ComparePair,
    page: Page,
    *,
    status_a: str | None = None,
    status_b: str | None = None,
    change: str | None = None,
) -> list[CompareTask]:
    """GET /api/compare/{corpus}/{a}/{b}/tasks: the documents on which A and B differ, in document order,
    optionally of one transition (A's status -> B's) or only those B made worse."""
    a, b = status_filter(status_a, "status_a"), status_filter(status_b, "status_b")
    where, params = _transition_where(a, b, change)
    where = where.replace("previous_status", "status_a").replace("current_status", "status_b")
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT d.name, j.status_a, j.status_b FROM"
            f" (SELECT * FROM ({_compare_join()}) j WHERE status_a <> status_b{where}"
            "  ORDER BY document_id OFFSET %s LIMIT %s) j"
            f" JOIN {DOCUMENT_TABLE} d ON d.id = j.document_id ORDER BY j.document_id",
            [*_compare_params(scope), *params, page.offset, page.page_size],
        )
        rows = cursor.fetchall()
    corpus, service_a, service_b = scope.corpus.name, scope.service_a.name, scope.service_b.name
    return [
        CompareTask(
            corpus=corpus,
            service_a=service_a,
            service_b=service_b,
            document=name,
            status_a=DIFF_BUCKET_NAMES[sa],
            status_b=DIFF_BUCKET_NAMES[sb],
            regression=regressed(DIFF_BUCKET_NAMES[sa], DIFF_BUCKET_NAMES[sb]),
        )
        for name, sa, sb in rows
    ]
