"""Reads of runs and snapshots: history, the open run, snapshot dates, diffs and their task lists, and
the comparison of two services on one corpus. A diff is read after runs.actions.diff_ensure made it,
its task list after diff_rows_ensure wrote its changed documents."""

# ruff: noqa: S608  (statements are fixed text and status constants; values are parameters)
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import connection, transaction

from config.api.paging import Page
from config.errors import BadRequest, NotFound
from config.planner import BULK_SETTINGS
from corpora.links import document_api_url
from corpora.models import Activation, Corpus, Run, Snapshot, TaskCount
from corpora.queries import corpus_get, pair_get, status_counts
from corpora.statuses import ABSENT_BUCKET, DIFF_BUCKET_NAMES, DIFF_BUCKETS, regressed
from runs.models import SnapshotDiff
from services.models import PROTECTED_SERVICES, Service
from services.queries import service_get

# --- runs ----------------------------------------------------------------------------------------


def history_limit(limit: int | None) -> int:
    """`limit` of a run history: default RUNS_PAGE_DEFAULT, at most RUNS_PAGE_MAX, 400 below 1."""
    if limit is None:
        return settings.RUNS_PAGE_DEFAULT
    if limit < 1:
        raise BadRequest("limit must be at least 1.", errors={"limit": ["at least 1"]})
    return min(limit, settings.RUNS_PAGE_MAX)


def _run_records(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Run DTOs; the open runs' live tallies come from one read of the counts of all their pairs."""
    open_pairs = {(r["corpus_id"], r["service_id"]) for r in runs if r["finished_at"] is None}
    rows: dict[tuple[int, int], list[tuple[int, int]]] = {pair: [] for pair in open_pairs}
    if open_pairs:
        counts = TaskCount.objects.filter(
            corpus_id__in={c for c, _ in open_pairs}, service_id__in={s for _, s in open_pairs}
        ).values_list("corpus_id", "service_id", "bucket", "count")
        for corpus_id, service_id, bucket, count in counts:
            if (corpus_id, service_id) in rows:
                rows[corpus_id, service_id].append((bucket, count))
    live = {pair: status_counts(pair_rows) for pair, pair_rows in rows.items()}
    return [_run_record(run, live.get((run["corpus_id"], run["service_id"]))) for run in runs]


def _run_record(run: dict[str, Any], live_tallies: dict[str, Any] | None = None) -> dict[str, Any]:
    end = run["finished_at"]
    return {
        "id": run["id"],
        "corpus": run["corpus__name"],
        "service": run["service__name"],
        "owner": run["owner"],
        "description": run["description"],
        "started_at": run["started_at"],
        "finished_at": end,
        "duration_seconds": round((end - run["started_at"]).total_seconds(), 3) if end else None,
        "open": end is None,
        "tallies": run["tallies"] if end is not None else live_tallies,
        "snapshot_at": run["snapshot__taken_at"],
    }


# A history page reads its runs as plain rows: model instances of each run, corpus, service and snapshot
# made a large page markedly slower (bench/README.md, "Runs").
_RUN_FIELDS = (
    "id", "corpus_id", "service_id", "corpus__name", "service__name", "owner", "description", "started_at",
    "finished_at", "tallies", "snapshot__taken_at",
)  # fmt: skip


def _runs() -> Any:
    return Run.objects.values(*_RUN_FIELDS)


def run_history(
    *, corpus: str | None = None, service: str | None = None, owner: str | None = None, limit: int | None = None
) -> list[dict[str, Any]]:
    """GET /api/runs: every run, newest first, optionally of one corpus, service or owner."""
    runs = _runs()
    if corpus:
        runs = runs.filter(corpus__name=corpus)
    if service:
        runs = runs.filter(service__name=service)
    if owner:
        runs = runs.filter(owner=owner)
    return _run_records(list(runs.order_by("-started_at", "-id")[: history_limit(limit)]))


@dataclass(frozen=True)
class Pair:
    corpus: Corpus
    service: Service


def pair_known(corpus_name: str, service_name: str) -> Pair:
    """A (corpus, service) pair with an activation or a history; 404 for anything else."""
    corpus, service = pair_get(corpus_name, service_name)
    known = (
        Activation.objects.filter(corpus=corpus, service=service).exists()
        or Run.objects.filter(corpus=corpus, service=service).exists()
        or Snapshot.objects.filter(corpus=corpus, service=service).exists()
    )
    if not known:
        raise NotFound(f"The service {service_name!r} has never run on the corpus {corpus_name!r}.")
    return Pair(corpus, service)


def pair_runs(corpus_name: str, service_name: str, *, limit: int | None = None) -> list[dict[str, Any]]:
    """GET /api/runs/{corpus}/{service}: the pair's runs, most recent first."""
    pair = pair_known(corpus_name, service_name)
    runs = _runs().filter(corpus=pair.corpus, service=pair.service).order_by("-started_at", "-id")
    return _run_records(list(runs[: history_limit(limit)]))


def run_current(corpus_name: str, service_name: str) -> dict[str, Any] | None:
    """GET /api/runs/{corpus}/{service}/current: the open run with live tallies, or None."""
    pair = pair_known(corpus_name, service_name)
    run = _runs().filter(corpus=pair.corpus, service=pair.service, finished_at__isnull=True).first()
    return _run_records([run])[0] if run else None


# --- snapshots and diffs -------------------------------------------------------------------------


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


def diff_scope(
    corpus_name: str, service_name: str, previous: datetime | None = None, current: datetime | None = None
) -> DiffScope:
    """Resolve `previous` and `current` to snapshots of the pair (404 for a date that is none); by default
    the two most recent. A `previous` alone is compared with the latest snapshot."""
    pair = pair_known(corpus_name, service_name)
    refs = [
        SnapshotRef(*row)
        for row in Snapshot.objects.filter(corpus=pair.corpus, service=pair.service)
        .order_by("-taken_at")
        .values_list("id", "taken_at", "tasks")
    ]
    by_date = {ref.taken_at: ref for ref in refs}

    def pick(date: datetime, which: str) -> SnapshotRef:
        if date not in by_date:
            raise NotFound(
                f"No snapshot of {service_name!r} on {corpus_name!r} was taken at {date.isoformat()}; "
                "available_dates of the diff lists those that were.",
                errors={which: ["not a snapshot date"]},
            )
        return by_date[date]

    cur = pick(current, "current") if current is not None else (refs[0] if refs else None)
    if previous is not None:
        prev = pick(previous, "previous")
    else:
        older = [ref for ref in refs if cur is not None and ref.taken_at < cur.taken_at]
        prev = older[0] if older else None
    if prev is None or cur is None:
        return DiffScope(pair, [ref.taken_at for ref in refs], None, None)
    return DiffScope(pair, [ref.taken_at for ref in refs], prev, cur)


def _cells(matrix: list[list[int]]) -> list[dict[str, Any]]:
    return [
        {"previous": DIFF_BUCKET_NAMES[p], "current": DIFF_BUCKET_NAMES[c], "count": n,
         "regression": regressed(DIFF_BUCKET_NAMES[p], DIFF_BUCKET_NAMES[c])}
        for p, c, n in matrix
    ]  # fmt: skip


def run_diff(scope: DiffScope, diff_id: int | None) -> dict[str, Any]:
    """GET /api/runs/{corpus}/{service}/diff: the snapshot dates and the matrix of the chosen pair."""
    diff = SnapshotDiff.objects.filter(pk=diff_id).first() if diff_id else None
    matrix = _cells(diff.matrix) if diff else []
    return {
        "corpus": scope.pair.corpus.name,
        "service": scope.pair.service.name,
        "available_dates": scope.dates,
        "previous": scope.previous.taken_at if scope.previous else None,
        "current": scope.current.taken_at if scope.current else None,
        "total": sum(cell["count"] for cell in matrix),
        "changed": diff.changed if diff else 0,
        "regressions": sum(cell["count"] for cell in matrix if cell["regression"]),
        "matrix": matrix,
    }


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
    scope: DiffScope,
    diff_id: int | None,
    page: Page,
    *,
    previous_status: str | None = None,
    current_status: str | None = None,
    change: str | None = None,
) -> list[dict[str, Any]]:
    """GET /api/runs/{corpus}/{service}/tasks: the documents whose status changed, by transition and
    document, optionally of one transition (or only regressions). The diff's matrix says which
    transitions the page covers and where in each it starts, so each is one index range."""
    previous = status_filter(previous_status, "previous_status")
    current = status_filter(current_status, "current_status")
    if diff_id is None:
        return []
    matrix = SnapshotDiff.objects.filter(pk=diff_id).values_list("matrix", flat=True).first() or []
    segments = _page_segments(matrix, page, previous, current, change)
    if not segments:
        return []
    branch = (
        "(SELECT %s::int AS segment, previous_status, current_status, document_id FROM runs_taskdiff"
        " WHERE diff_id = %s AND previous_status = %s AND current_status = %s ORDER BY document_id OFFSET %s LIMIT %s)"
    )
    params = [v for i, s in enumerate(segments) for v in (i, diff_id, s.previous, s.current, s.offset, s.limit)]
    with transaction.atomic(), connection.cursor() as cursor:
        for statement in _TASK_PAGE_SETTINGS:
            cursor.execute(statement)
        cursor.execute(
            "SELECT d.name, t.previous_status, t.current_status FROM ("
            + " UNION ALL ".join([branch] * len(segments))
            + ") t JOIN corpora_document d ON d.id = t.document_id ORDER BY t.segment, t.document_id",
            params,
        )
        rows = cursor.fetchall()
    corpus, service = scope.pair.corpus.name, scope.pair.service.name
    return [_task_diff(corpus, service, name, p, c) for name, p, c in rows]


def task_diff_count(
    diff_id: int | None,
    *,
    previous_status: str | None = None,
    current_status: str | None = None,
    change: str | None = None,
) -> int:
    """How many documents task_diffs lists under the same filters, from the diff's stored matrix (for
    the screen's pager)."""
    previous = status_filter(previous_status, "previous_status")
    current = status_filter(current_status, "current_status")
    diff = SnapshotDiff.objects.filter(pk=diff_id).only("matrix").first() if diff_id else None
    if diff is None:
        return 0
    return sum(
        count
        for p, c, count in diff.matrix
        if p != c
        and previous in (None, p)
        and current in (None, c)
        and (change != "regressed" or regressed(DIFF_BUCKET_NAMES[p], DIFF_BUCKET_NAMES[c]))
    )


def _task_diff(corpus: str, service: str, name: str, previous: int, current: int) -> dict[str, Any]:
    previous_name, current_name = DIFF_BUCKET_NAMES[previous], DIFF_BUCKET_NAMES[current]
    return {
        "document": name,
        "previous_status": previous_name,
        "current_status": current_name,
        "regression": regressed(previous_name, current_name),
        "report": document_api_url(corpus, service, name),
    }


# --- converter comparison ------------------------------------------------------------------------


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


def comparable_services(corpus_name: str, service_name: str) -> list[str]:
    """The other converters with tasks on the corpus, by name: what the service can be compared with."""
    names = (
        TaskCount.objects.filter(corpus__name=corpus_name, count__gt=0)
        .exclude(service__name=service_name)
        .exclude(service__name__in=PROTECTED_SERVICES)
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
        " FROM (SELECT document_id, status FROM corpora_task WHERE service_id = %s AND corpus_id = %s) a"
        " FULL JOIN (SELECT document_id, status FROM corpora_task WHERE service_id = %s AND corpus_id = %s) b"
        " ON a.document_id = b.document_id"
    )


def _compare_params(scope: ComparePair) -> list[int]:
    return [scope.service_a.pk, scope.corpus.pk, scope.service_b.pk, scope.corpus.pk]


def compare_matrix(scope: ComparePair) -> dict[str, Any]:
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
        {"status_a": DIFF_BUCKET_NAMES[a], "status_b": DIFF_BUCKET_NAMES[b], "count": n,
         "regression": regressed(DIFF_BUCKET_NAMES[a], DIFF_BUCKET_NAMES[b])}
        for a, b, n in rows
    ]  # fmt: skip
    return {
        "corpus": scope.corpus.name,
        "service_a": scope.service_a.name,
        "service_b": scope.service_b.name,
        "total": sum(cell["count"] for cell in matrix),
        "differ": sum(cell["count"] for cell in matrix if cell["status_a"] != cell["status_b"]),
        "regressions": sum(cell["count"] for cell in matrix if cell["regression"]),
        "matrix": matrix,
    }


def compare_tasks(
    scope: ComparePair,
    page: Page,
    *,
    status_a: str | None = None,
    status_b: str | None = None,
    change: str | None = None,
) -> list[dict[str, Any]]:
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
            " JOIN corpora_document d ON d.id = j.document_id ORDER BY j.document_id",
            [*_compare_params(scope), *params, page.offset, page.page_size],
        )
        rows = cursor.fetchall()
    corpus = scope.corpus.name
    return [
        {"document": name, "status_a": DIFF_BUCKET_NAMES[sa], "status_b": DIFF_BUCKET_NAMES[sb],
         "regression": regressed(DIFF_BUCKET_NAMES[sa], DIFF_BUCKET_NAMES[sb]),
         "report_a": document_api_url(corpus, scope.service_a.name, name),
         "report_b": document_api_url(corpus, scope.service_b.name, name)}
        for name, sa, sb in rows
    ]  # fmt: skip


# --- pruning -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PruneScope:
    """What a prune may touch: history before `before`, of one corpus, one service, or both, or all."""

    before: datetime
    corpus: Corpus | None
    service: Service | None

    def pair_where(self, alias: str) -> tuple[str, list[Any]]:
        clauses, params = [], []
        if self.corpus is not None:
            clauses.append(f" AND {alias}.corpus_id = %s")
            params.append(self.corpus.pk)
        if self.service is not None:
            clauses.append(f" AND {alias}.service_id = %s")
            params.append(self.service.pk)
        return "".join(clauses), params


def prune_scope(before: datetime, corpus: str | None = None, service: str | None = None) -> PruneScope:
    """The scope of a prune; NotFound for a corpus or service name that does not exist."""
    return PruneScope(before, corpus_get(corpus) if corpus else None, service_get(service) if service else None)


def prune_snapshots_sql(scope: PruneScope) -> tuple[str, list[Any]]:
    """The snapshots a prune removes: taken before the cutoff, never the latest of its pair (the unique
    (corpus, service, taken_at) index finds each pair's latest)."""
    where, params = scope.pair_where("s")
    sql = (
        "SELECT s.id FROM runs_snapshot s WHERE s.taken_at < %s" + where + " AND s.taken_at <"
        " (SELECT max(l.taken_at) FROM runs_snapshot l WHERE l.corpus_id = s.corpus_id AND l.service_id = s.service_id)"
    )
    return sql, [scope.before, *params]


def prune_runs_sql(scope: PruneScope) -> tuple[str, list[Any]]:
    """The WHERE of the runs a prune removes: finished before the cutoff (an open run has no end)."""
    where, params = scope.pair_where("r")
    return "r.finished_at < %s" + where, [scope.before, *params]


def taskdiff_share() -> tuple[int, int]:
    """runs_taskdiff's size on disk (table, indexes, TOAST) and its row count, read from the diffs'
    `changed` counts rather than by counting the table: a diff's rows are its changed documents."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_total_relation_size('runs_taskdiff'),"
            " (SELECT coalesce(sum(changed), 0) FROM runs_snapshotdiff WHERE rows_ready)"
        )
        relation_bytes, rows = cursor.fetchone()
    return int(relation_bytes), int(rows)


PRUNE_COUNTS = ("runs", "snapshots", "diffs", "diff_rows", "bytes")


def prune_summary(
    scope: PruneScope,
    pairs: dict[tuple[int, int], dict[str, int]],
    taskdiff: tuple[int, int],
) -> dict[str, Any]:
    """The summary of a prune (previewed or done): per pair and in total, the runs, snapshots, diffs
    and diff rows removed, and the bytes it frees: the snapshots' two arrays and the diffs' matrices as
    stored (pg_column_size), plus the diff rows' proportional share of runs_taskdiff
    (pg_total_relation_size times their fraction of its rows). Deleted rows are reused by the
    tables once autovacuum has passed; the files do not shrink."""
    relation_bytes, relation_rows = taskdiff
    corpora = dict(Corpus.objects.filter(pk__in={c for c, _ in pairs}).values_list("pk", "name"))
    services = dict(Service.objects.filter(pk__in={s for _, s in pairs}).values_list("pk", "name"))
    records = []
    for (corpus_id, service_id), counts in pairs.items():
        share = relation_bytes * counts.get("diff_rows", 0) // relation_rows if relation_rows else 0
        record = {key: counts.get(key, 0) for key in PRUNE_COUNTS}
        record["bytes"] += share
        records.append({"corpus": corpora[corpus_id], "service": services[service_id], **record})
    records.sort(key=lambda r: (r["corpus"], r["service"]))
    return {
        "before": scope.before,
        "corpus": scope.corpus.name if scope.corpus else None,
        "service": scope.service.name if scope.service else None,
        "pairs": records,
        "total": {key: sum(r[key] for r in records) for key in PRUNE_COUNTS},
    }


def prune_tally(pairs: dict[tuple[int, int], dict[str, int]], rows: list[tuple], *keys: str) -> None:
    """Add rows of (corpus_id, service_id, value for each key) to the per-pair counts."""
    for corpus_id, service_id, *values in rows:
        counts = pairs.setdefault((corpus_id, service_id), {})
        for key, value in zip(keys, values, strict=True):
            counts[key] = counts.get(key, 0) + int(value or 0)


def prune_preview(before: datetime, corpus: str | None = None, service: str | None = None) -> dict[str, Any]:
    """What history_prune would remove with the same arguments, per (corpus, service) pair: runs
    finished before `before`, snapshots taken before it but the latest of each pair, and every diff
    (with its rows) of a removed snapshot."""
    scope = prune_scope(before, corpus, service)
    snapshots, snapshot_params = prune_snapshots_sql(scope)
    runs, run_params = prune_runs_sql(scope)
    pairs: dict[tuple[int, int], dict[str, int]] = {}
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT r.corpus_id, r.service_id, count(*) FROM runs_run r WHERE {runs} GROUP BY 1, 2", run_params
        )
        prune_tally(pairs, cursor.fetchall(), "runs")
        cursor.execute(
            f"WITH gone AS MATERIALIZED ({snapshots})"
            " SELECT s.corpus_id, s.service_id, count(*),"
            "  sum(pg_column_size(s.document_ids) + pg_column_size(s.statuses))"
            " FROM runs_snapshot s WHERE s.id IN (SELECT id FROM gone) GROUP BY 1, 2",
            snapshot_params,
        )
        prune_tally(pairs, cursor.fetchall(), "snapshots", "bytes")
        cursor.execute(
            f"WITH gone AS MATERIALIZED ({snapshots})"
            " SELECT p.corpus_id, p.service_id, count(*), coalesce(sum(d.changed) FILTER (WHERE d.rows_ready), 0),"
            " sum(pg_column_size(d.matrix))"
            " FROM runs_snapshotdiff d JOIN runs_snapshot p ON p.id = d.previous_id"
            " WHERE d.previous_id IN (SELECT id FROM gone) OR d.current_id IN (SELECT id FROM gone) GROUP BY 1, 2",
            snapshot_params,
        )
        prune_tally(pairs, cursor.fetchall(), "diffs", "diff_rows", "bytes")
        share = taskdiff_share()
    return prune_summary(scope, pairs, share)
