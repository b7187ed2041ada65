"""Reads of package attribution (docs/decisions/package-attribution.md): the ranked packages and classes
of a pair, live or as a closed run froze them, the papers behind one of them, and which packages gained or
lost papers between two snapshots. A ranking sums tallies: corpora's PackageTally (live) or a snapshot's
SnapshotPackage tallies, a few rows a package, whatever the papers; the papers behind a row come from
TaskPackage (live) or the SnapshotPackage arrays, which keep the papers that showed trouble with a
package. Flags are conversion.choices.PackageFlag bits."""

# ruff: noqa: S608  (statements are fixed text, table names and flag constants; values are parameters)
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import connection, transaction

from config.api.paging import Page
from config.errors import BadRequest, NotFound
from conversion.attribution import evidence_names
from conversion.choices import COMPLETED, PackageFlag, PackageKind
from corpora.models import Run
from corpora.queries.corpora import Pair, package_tallies_sql, retired_messages_exist
from corpora.queries.diffs import DiffScope
from corpora.queries.history import pair_known
from corpora.statuses import status_name
from corpora.tables import DOCUMENT_TABLE, SNAPSHOT_PACKAGE_TABLE, STALE_MESSAGES_TABLE, TASK_PACKAGE_TABLE

# How a ranking is ordered: the papers a package alone keeps from being error-free first.
ORDER = "clears DESC, clears_weak DESC, only_missing DESC, papers DESC, kind, package"
DIFF_NAMES_MAX = 20  # documents named per gained or lost list of a diff row


@dataclass(frozen=True)
class Source:
    """Where a ranking's rows come from: the pair's tasks now (snapshot None), or a closed run's snapshot."""

    pair: Pair
    run_id: int | None
    snapshot_id: int | None
    taken_at: datetime | None


def package_source(pair: Pair, run_id: int | None = None) -> Source:
    """The rows a ranking reads: a run of the pair (404 for another) as its snapshot froze them, or live
    while it is open; without a run, the pair's tasks now."""
    pair_known(pair)
    if run_id is None:
        return Source(pair, None, None, None)
    run = (
        Run.objects.filter(pk=run_id, corpus_id=pair.corpus_id, service_id=pair.service_id)
        .values("snapshot_id", "snapshot__taken_at")
        .first()
    )
    if run is None:
        raise NotFound(
            f"No run {run_id} of {pair.service_name!r} on {pair.corpus_name!r}.", errors={"run": ["unknown"]}
        )
    return Source(pair, run_id, run["snapshot_id"], run["snapshot__taken_at"])


def _rows_sql(source: Source) -> tuple[str, list[Any]]:
    """A statement of (kind, package, document_id, task_status, flags), one row per (document, package)."""
    if source.snapshot_id is not None:
        return _snapshot_rows_sql(), [source.snapshot_id]
    retired = ""
    if retired_messages_exist(source.pair.corpus_id, source.pair.service_id):
        retired = f" AND NOT EXISTS (SELECT FROM {STALE_MESSAGES_TABLE} z WHERE z.task_id = p.task_id)"
    return (
        f"SELECT p.kind, p.package, p.document_id, p.task_status, p.flags FROM {TASK_PACKAGE_TABLE} p"
        f" WHERE p.corpus_id = %s AND p.service_id = %s{retired}",
        [source.pair.corpus_id, source.pair.service_id],
    )


def _tallies_sql(source: Source) -> tuple[str, list[Any]]:
    """A statement of (kind, package, flags, task_status, tasks): the tallies a ranking sums."""
    if source.snapshot_id is not None:
        return (
            "SELECT s.kind, s.package, t.flags, t.task_status, t.tasks"
            f" FROM {SNAPSHOT_PACKAGE_TABLE} s, unnest(s.tally_flags, s.tally_statuses, s.tally_tasks)"
            " AS t(flags, task_status, tasks) WHERE s.snapshot_id = %s"
        ), [source.snapshot_id]
    return package_tallies_sql(source.pair.corpus_id, source.pair.service_id)


def _snapshot_rows_sql() -> str:
    return (
        f"SELECT s.kind, s.package, u.document_id, u.task_status, u.flags FROM {SNAPSHOT_PACKAGE_TABLE} s,"
        " unnest(s.document_ids, s.statuses, s.flags) AS u(document_id, task_status, flags) WHERE s.snapshot_id = %s"
    )


def kind_check(kind: str | None) -> str | None:
    if kind in (None, ""):
        return None
    if kind not in PackageKind.__members__.values():
        raise BadRequest(f"Unknown kind {kind!r}; use package or class.", errors={"kind": ["unknown"]})
    return kind


@dataclass(frozen=True)
class PackageRow:
    """One package or class of a ranking (PackageRowSerializer)."""

    kind: str
    package: str
    papers: int
    statuses: dict[str, int]
    only_missing: int
    clears: int
    clears_weak: int
    evidence: list[str]


@dataclass(frozen=True)
class PackageRanking:
    corpus: str
    service: str
    run: int | None
    taken_at: datetime | None
    count: int
    rows: list[PackageRow]


def _flag(bit: PackageFlag) -> str:
    return f"coalesce(sum(r.tasks) FILTER (WHERE r.flags & {int(bit)} <> 0), 0)::bigint"


def package_ranking(source: Source, page: Page, kind: str | None = None) -> PackageRanking:
    """GET /api/runs/{corpus}/{service}/packages: every package and class the pair's papers used, ranked by
    the papers each alone keeps from being error-free, then by those it is the only missing one of. It sums
    the tallies, a few rows a package, so its cost follows the packages, not the papers."""
    rows_sql, params = _tallies_sql(source)
    where = " WHERE r.kind = %s" if kind else ""
    statuses = ", ".join(
        f"coalesce(sum(r.tasks) FILTER (WHERE r.task_status = {int(status)}), 0)::bigint" for status in COMPLETED
    )
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT r.kind, r.package, sum(r.tasks)::bigint AS papers, {statuses},"
            f" {_flag(PackageFlag.ONLY)} AS only_missing,"
            f" {_flag(PackageFlag.CLEARS)} AS clears, {_flag(PackageFlag.CLEARS_WEAK)} AS clears_weak,"
            " bit_or(r.flags), count(*) OVER () AS total"
            f" FROM ({rows_sql}) r{where} GROUP BY r.kind, r.package ORDER BY {ORDER} OFFSET %s LIMIT %s",
            [*params, *([kind] if kind else []), page.offset, page.page_size],
        )
        fetched = cursor.fetchall()
    rows = []
    for kind_, package, papers, *rest in fetched:
        counts, (only, clears, clears_weak, flags, _) = rest[: len(COMPLETED)], rest[len(COMPLETED) :]
        rows.append(PackageRow(
            kind_, package, papers, {status.key: n for status, n in zip(COMPLETED, counts, strict=True)},
            only, clears, clears_weak, evidence_names(flags),
        ))  # fmt: skip
    count = fetched[0][-1] if fetched else 0
    pair = source.pair
    return PackageRanking(pair.corpus_name, pair.service_name, source.run_id, source.taken_at, count, rows)


@dataclass(frozen=True)
class PackagePaper:
    """A paper of a pair behind a ranking row (PackagePaperSerializer, which links it)."""

    corpus: str
    service: str
    document: str
    status: str
    only_missing: bool
    clears: bool
    clears_weak: bool
    evidence: list[str]


def package_papers(source: Source, kind: str, package: str, page: Page) -> list[PackagePaper]:
    """GET /api/runs/{corpus}/{service}/packages/{kind}/{package}: the papers behind one row, those the
    package alone keeps from being error-free first, then by status and document. Live, every paper that
    used it; for a closed run, those that showed trouble with it, which its snapshot keeps
    (corpora.pairs.snapshot_packages_sql)."""
    rows_sql, params = _rows_sql(source)
    # The page is cut before the documents' names are read: a class every paper uses has millions of rows.
    order = (
        f"r.flags & {int(PackageFlag.CLEARS)} DESC, r.flags & {int(PackageFlag.CLEARS_WEAK)} DESC,"
        f" r.flags & {int(PackageFlag.ONLY)} DESC, r.task_status, r.document_id"
    )
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT d.name, r.task_status, r.flags FROM (SELECT * FROM ({rows_sql}) r"
            f"  WHERE r.kind = %s AND r.package = %s ORDER BY {order} OFFSET %s LIMIT %s) r"
            f" JOIN {DOCUMENT_TABLE} d ON d.id = r.document_id ORDER BY {order}",
            [*params, kind, package, page.offset, page.page_size],
        )
        fetched = cursor.fetchall()
    corpus, service = source.pair.corpus_name, source.pair.service_name
    return [
        PackagePaper(
            corpus, service, name, status_name(status), bool(flags & PackageFlag.ONLY),
            bool(flags & PackageFlag.CLEARS), bool(flags & PackageFlag.CLEARS_WEAK), evidence_names(flags),
        )
        for name, status, flags in fetched
    ]  # fmt: skip


@dataclass(frozen=True)
class PackageChange:
    """One package whose papers changed between two snapshots (PackageChangeSerializer)."""

    kind: str
    package: str
    previous_papers: int
    current_papers: int
    gained: list[str]
    lost: list[str]
    gained_count: int
    lost_count: int
    previous_clears: int
    current_clears: int


@dataclass(frozen=True)
class PackageDiff:
    corpus: str
    service: str
    available_dates: list[datetime]
    previous: datetime | None
    current: datetime | None
    changes: list[PackageChange]


def package_diff(scope: DiffScope, page: Page) -> PackageDiff:
    """GET /api/runs/{corpus}/{service}/packages/diff: the packages whose papers changed between two
    snapshots (by default the two latest): the papers that show trouble with a package gained and lost
    (the documents a snapshot keeps), and its papers before and after from the tallies; most papers gained
    or lost first."""
    changes: list[PackageChange] = []
    if scope.previous is not None and scope.current is not None:
        clears = int(PackageFlag.CLEARS)
        papers = (
            f"SELECT s.kind, s.package, sum(n)::bigint AS papers FROM {SNAPSHOT_PACKAGE_TABLE} s,"
            " unnest(s.tally_tasks) AS n WHERE s.snapshot_id = %s GROUP BY s.kind, s.package"
        )
        with connection.cursor() as cursor:
            cursor.execute(
                f"WITH a AS ({_snapshot_rows_sql()}), b AS ({_snapshot_rows_sql()}),"
                " j AS (SELECT coalesce(a.kind, b.kind) AS kind, coalesce(a.package, b.package) AS package,"
                "  coalesce(a.document_id, b.document_id) AS document_id, a.flags AS before, b.flags AS after"
                "  FROM a FULL JOIN b USING (kind, package, document_id)),"
                " c AS (SELECT j.kind, j.package,"
                f"  (array_agg(d.name ORDER BY d.name) FILTER (WHERE j.before IS NULL))[1:{DIFF_NAMES_MAX}] AS gained,"
                f"  (array_agg(d.name ORDER BY d.name) FILTER (WHERE j.after IS NULL))[1:{DIFF_NAMES_MAX}] AS lost,"
                "  count(*) FILTER (WHERE j.before IS NULL) AS n_gained,"
                "  count(*) FILTER (WHERE j.after IS NULL) AS n_lost,"
                f"  count(*) FILTER (WHERE j.before & {clears} <> 0) AS c0,"
                f"  count(*) FILTER (WHERE j.after & {clears} <> 0) AS c1"
                f"  FROM j JOIN {DOCUMENT_TABLE} d ON d.id = j.document_id GROUP BY j.kind, j.package),"
                f" pa AS ({papers}), pb AS ({papers})"
                " SELECT kind, package, coalesce(pa.papers, 0), coalesce(pb.papers, 0), c.gained, c.lost,"
                "  coalesce(c.n_gained, 0), coalesce(c.n_lost, 0), coalesce(c.c0, 0), coalesce(c.c1, 0)"
                " FROM pa FULL JOIN pb USING (kind, package) FULL JOIN c USING (kind, package)"
                " WHERE coalesce(pa.papers, 0) <> coalesce(pb.papers, 0) OR c.n_gained > 0 OR c.n_lost > 0"
                "  OR c.c0 <> c.c1"
                " ORDER BY coalesce(c.n_gained, 0) + coalesce(c.n_lost, 0) DESC,"
                "  abs(coalesce(pa.papers, 0) - coalesce(pb.papers, 0)) DESC, kind, package OFFSET %s LIMIT %s",
                [scope.previous.id, scope.current.id, scope.previous.id, scope.current.id, page.offset, page.page_size],
            )
            changes = [
                PackageChange(kind, package, before, after, gained or [], lost or [], n_gained, n_lost, c0, c1)
                for kind, package, before, after, gained, lost, n_gained, n_lost, c0, c1 in cursor.fetchall()
            ]
    pair = scope.pair
    return PackageDiff(
        pair.corpus_name, pair.service_name, scope.dates,
        scope.previous.taken_at if scope.previous else None, scope.current.taken_at if scope.current else None,
        changes,
    )  # fmt: skip


EXPORT_HEADER = ("kind", "package", "document", "status", "only_missing", "clears", "clears_weak", "evidence")
EXPORT_BATCH = 10_000


def package_export(source: Source) -> Iterator[list[tuple[Any, ...]]]:
    """GET /api/runs/{corpus}/{service}/packages/export: every (package, paper) row of a ranking, in batches
    read through a server-side cursor (EXPORT_HEADER's columns), by package and document."""
    rows_sql, params = _rows_sql(source)
    with transaction.atomic(), connection.chunked_cursor() as cursor:
        cursor.execute(
            f"SELECT r.kind, r.package, d.name, r.task_status, r.flags FROM ({rows_sql}) r"
            f" JOIN {DOCUMENT_TABLE} d ON d.id = r.document_id ORDER BY r.kind, r.package, d.name",
            params,
        )
        while batch := cursor.fetchmany(EXPORT_BATCH):
            yield [
                (kind, package, name, status_name(status), bool(flags & PackageFlag.ONLY),
                 bool(flags & PackageFlag.CLEARS), bool(flags & PackageFlag.CLEARS_WEAK),
                 " ".join(evidence_names(flags)))
                for kind, package, name, status, flags in batch
            ]  # fmt: skip
