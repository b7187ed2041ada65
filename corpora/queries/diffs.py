"""Reads of snapshots and their diffs: the two snapshots a diff compares, the diff's matrix and the pages
of its changed documents. A diff is read after corpora.actions.diffs.diff_ensure made it, its task list after
diff_rows_ensure wrote its changed documents (corpora.actions.history.diff_read and task_diffs_read do both)."""

# ruff: noqa: S608  (statements are fixed text and status constants; values are parameters)
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TypedDict, Unpack

from django.db import connection, transaction

from config.api.paging import Page
from config.errors import BadRequest, NotFound
from corpora.models import Snapshot, SnapshotDiff
from corpora.queries.corpora import Pair
from corpora.queries.history import RunProfile, pair_known, run_at
from corpora.statuses import DIFF_BUCKET_NAMES, DIFF_BUCKETS, regressed
from corpora.tables import DOCUMENT_TABLE, SNAPSHOT_TABLE, TASK_DIFF_TABLE


@dataclass(frozen=True)
class SnapshotRef:
    id: int
    taken_at: datetime
    tasks: int


@dataclass(frozen=True)
class DiffScope:
    """Two snapshots of a pair to compare (either None when the pair has fewer than two), and every
    snapshot date of the pair, newest first."""

    pair: Pair
    dates: list[datetime]
    previous: SnapshotRef | None
    current: SnapshotRef | None


def diff_scope(pair: Pair, previous: datetime | None = None, current: datetime | None = None) -> DiffScope:
    """Resolve `previous` and `current` to snapshots of the pair (404 for a date that is none); by default
    the two most recent. A `previous` alone is compared with the latest snapshot."""
    pair_known(pair)
    refs = [
        SnapshotRef(*row)
        for row in Snapshot.objects.filter(corpus_id=pair.corpus_id, service_id=pair.service_id)
        .order_by("-taken_at")
        .values_list("id", "taken_at", "tasks")
    ]
    by_date = {ref.taken_at: ref for ref in refs}

    def pick(date: datetime, which: str) -> SnapshotRef:
        if date not in by_date:
            raise NotFound(
                f"No snapshot of {pair.service_name!r} on {pair.corpus_name!r} was taken at {date.isoformat()}; "
                "available_dates of the diff lists those that were.",
                errors={which: ["not a snapshot date"]},
            )
        return by_date[date]

    cur = pick(current, "current") if current is not None else (refs[0] if refs else None)
    if previous is not None:
        prev: SnapshotRef | None = pick(previous, "previous")
    else:
        older = [ref for ref in refs if cur is not None and ref.taken_at < cur.taken_at]
        prev = older[0] if older else None
    if prev is None or cur is None:
        return DiffScope(pair, [ref.taken_at for ref in refs], None, None)
    return DiffScope(pair, [ref.taken_at for ref in refs], prev, cur)


@dataclass(frozen=True)
class DiffCell:
    """The documents of one transition (previous status -> current status) of a diff (DiffCellSerializer)."""

    previous: str
    current: str
    count: int
    regression: bool


@dataclass(frozen=True)
class RunDiff:
    """The snapshot dates of a pair and the matrix of the two compared, with the run open when each was
    taken (RunDiffSerializer)."""

    corpus: str
    service: str
    available_dates: list[datetime]
    previous: datetime | None
    current: datetime | None
    total: int
    changed: int
    regressions: int
    matrix: list[DiffCell]
    exclude_infrastructure: bool
    infrastructure: int
    previous_run: RunProfile | None
    current_run: RunProfile | None


def matrix_without(matrix: list[list[int]], left_out: list[list[int]]) -> list[list[int]]:
    """A diff's matrix less the transitions of some of its documents (its infrastructure_matrix), empty cells
    dropped."""
    gone = {(p, c): n for p, c, n in left_out}
    cells = [[p, c, n - gone.get((p, c), 0)] for p, c, n in matrix]
    return [cell for cell in cells if cell[2] > 0]


def _stored_matrices(diff_id: int | None) -> tuple[list[list[int]], list[list[int]]] | None:
    """A diff's stored matrix and its infrastructure failures' transitions; None without a diff."""
    if diff_id is None:
        return None
    return SnapshotDiff.objects.filter(pk=diff_id).values_list("matrix", "infrastructure_matrix").first()


def _diff_matrix(diff_id: int | None, exclude_infrastructure: bool) -> list[list[int]] | None:
    """The stored matrix of a diff, without the infrastructure failures' documents when asked; None without a diff."""
    stored = _stored_matrices(diff_id)
    if stored is None:
        return None
    matrix, infrastructure = stored
    return matrix_without(matrix, infrastructure) if exclude_infrastructure else matrix


def _cells(matrix: list[list[int]]) -> list[DiffCell]:
    return [
        DiffCell(DIFF_BUCKET_NAMES[p], DIFF_BUCKET_NAMES[c], n, regressed(DIFF_BUCKET_NAMES[p], DIFF_BUCKET_NAMES[c]))
        for p, c, n in matrix
    ]


def run_diff(scope: DiffScope, diff_id: int | None, *, exclude_infrastructure: bool = False) -> RunDiff:
    """GET /api/runs/{corpus}/{service}/diff: the snapshot dates and the matrix of the chosen pair, optionally
    without the documents that were an infrastructure failure in either snapshot (the machine's doing)."""
    stored, infrastructure = _stored_matrices(diff_id) or ([], [])
    matrix = _cells(matrix_without(stored, infrastructure) if exclude_infrastructure else stored)
    corpus_id, service_id = scope.pair.corpus_id, scope.pair.service_id
    return RunDiff(
        corpus=scope.pair.corpus_name,
        service=scope.pair.service_name,
        available_dates=scope.dates,
        previous=scope.previous.taken_at if scope.previous else None,
        current=scope.current.taken_at if scope.current else None,
        total=sum(cell.count for cell in matrix),
        changed=sum(cell.count for cell in matrix if cell.previous != cell.current),
        regressions=sum(cell.count for cell in matrix if cell.regression),
        matrix=matrix,
        exclude_infrastructure=exclude_infrastructure,
        infrastructure=sum(n for _, _, n in infrastructure),
        # How each snapshot's tasks were converted: the run open when it was taken.
        previous_run=run_at(corpus_id, service_id, scope.previous.taken_at) if scope.previous else None,
        current_run=run_at(corpus_id, service_id, scope.current.taken_at) if scope.current else None,
    )


def status_filter(name: str | None, which: str) -> int | None:
    """A status name of a diff filter (the overview's keys, or absent) as its bucket; 400 if unknown."""
    if name in (None, ""):
        return None
    if name not in DIFF_BUCKETS:
        raise BadRequest(
            f"Unknown {which} {name!r}; use one of {', '.join(DIFF_BUCKETS)}.",
            errors={which: ["unknown status"]},
        )
    return DIFF_BUCKETS[name]


class TaskDiffFilters(TypedDict, total=False):
    """The filters of a diff's changed documents, as task_diffs, task_diff_count and
    corpora.actions.history.task_diffs_read take them: one transition's previous and current status (names,
    either absent for any), only the regressions (change "regressed"), and whether the infrastructure
    failures' documents are left out."""

    previous_status: str | None
    current_status: str | None
    change: str | None
    exclude_infrastructure: bool


def _filters(filters: TaskDiffFilters) -> tuple[int | None, int | None, str | None, bool]:
    """The filters as buckets (400 on an unknown status name), the change, and exclude_infrastructure."""
    previous = status_filter(filters.get("previous_status"), "previous_status")
    current = status_filter(filters.get("current_status"), "current_status")
    return previous, current, filters.get("change"), filters.get("exclude_infrastructure", False)


@dataclass(frozen=True)
class _Segment:
    """A page's rows of one transition: `limit` documents from `offset` on, in document order."""

    previous: int
    current: int
    offset: int
    limit: int


def _page_segments(
    matrix: list[list[int]], page: Page, previous: int | None, current: int | None, change: str | None
) -> list[_Segment]:
    """The transitions a page of a diff's changed documents covers, from the diff's matrix (the count of
    each transition): the filter's transitions in page order (previous status, current status), whole
    ones before the page skipped by their counts."""
    chosen = sorted(
        (p, c, n) for p, c, n in matrix
        if p != c and previous in (None, p) and current in (None, c)
        and (change != "regressed" or regressed(DIFF_BUCKET_NAMES[p], DIFF_BUCKET_NAMES[c]))
    )  # fmt: skip
    segments, skip, wanted = [], page.offset, page.page_size
    for p, c, n in chosen:
        if wanted == 0:
            break
        if skip >= n:
            skip -= n
            continue
        take = min(n - skip, wanted)
        segments.append(_Segment(p, c, skip, take))
        skip, wanted = 0, wanted - take
    return segments


# Each segment of a page is read as one range of the (diff, previous, current, document) key, in key order:
# statistics of a diff just written say nothing of its rows yet (autovacuum has not analyzed them), and
# the planner would otherwise gather a whole transition with a bitmap scan and sort it for one page. The
# penalty of a disabled sort lifts the plan's cost above jit_above_cost, and JIT would cost more than the page.
_TASK_PAGE_SETTINGS = ("SET LOCAL enable_bitmapscan = off", "SET LOCAL enable_sort = off", "SET LOCAL jit = off")


def task_diffs(
    scope: DiffScope, diff_id: int | None, page: Page, **filters: Unpack[TaskDiffFilters]
) -> list[TaskDiffRow]:
    """GET /api/runs/{corpus}/{service}/tasks: the documents whose status changed, by transition and
    document, optionally of one transition (or only regressions), and without the infrastructure failures'
    documents. The diff's matrix says which transitions the page covers and where in each it starts, so each
    is one index range (less the few infrastructure failures' documents when they are left out)."""
    previous, current, change, exclude_infrastructure = _filters(filters)
    matrix = _diff_matrix(diff_id, exclude_infrastructure)
    if not matrix or scope.previous is None or scope.current is None:
        return []
    segments = _page_segments(matrix, page, previous, current, change)
    if not segments:
        return []
    left_out, extra = "", []
    if exclude_infrastructure:
        left_out = (
            f" AND document_id <> ALL(ARRAY(SELECT unnest(infrastructure_document_ids) FROM {SNAPSHOT_TABLE}"
            " WHERE id IN (%s, %s)))"
        )
        extra = [scope.previous.id, scope.current.id]
    branch = (
        f"(SELECT %s::int AS segment, previous_status, current_status, document_id FROM {TASK_DIFF_TABLE}"
        f" WHERE diff_id = %s AND previous_status = %s AND current_status = %s{left_out}"
        " ORDER BY document_id OFFSET %s LIMIT %s)"
    )
    params = [v for i, s in enumerate(segments) for v in (i, diff_id, s.previous, s.current, *extra, s.offset, s.limit)]
    with transaction.atomic(), connection.cursor() as cursor:
        for statement in _TASK_PAGE_SETTINGS:
            cursor.execute(statement)
        cursor.execute(
            "SELECT d.name, t.previous_status, t.current_status FROM ("
            + " UNION ALL ".join([branch] * len(segments))
            + f") t JOIN {DOCUMENT_TABLE} d ON d.id = t.document_id ORDER BY t.segment, t.document_id",
            params,
        )
        rows = cursor.fetchall()
    corpus, service = scope.pair.corpus_name, scope.pair.service_name
    return [_task_diff(corpus, service, name, p, c) for name, p, c in rows]


def task_diff_count(diff_id: int | None, **filters: Unpack[TaskDiffFilters]) -> int:
    """How many documents task_diffs lists under the same filters, from the diff's stored matrix (for
    the screen's pager)."""
    previous, current, change, exclude_infrastructure = _filters(filters)
    matrix = _diff_matrix(diff_id, exclude_infrastructure)
    if matrix is None:
        return 0
    return sum(
        count
        for p, c, count in matrix
        if p != c
        and previous in (None, p)
        and current in (None, c)
        and (change != "regressed" or regressed(DIFF_BUCKET_NAMES[p], DIFF_BUCKET_NAMES[c]))
    )


@dataclass(frozen=True)
class TaskDiffRow:
    """A document of a pair whose status changed between two snapshots (TaskDiffSerializer, which links it)."""

    corpus: str
    service: str
    document: str
    previous_status: str
    current_status: str
    regression: bool


def _task_diff(corpus: str, service: str, name: str, previous: int, current: int) -> TaskDiffRow:
    previous_name, current_name = DIFF_BUCKET_NAMES[previous], DIFF_BUCKET_NAMES[current]
    return TaskDiffRow(
        corpus=corpus,
        service=service,
        document=name,
        previous_status=previous_name,
        current_status=current_name,
        regression=regressed(previous_name, current_name),
    )
