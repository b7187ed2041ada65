"""Reads of history pruning: the scope of a prune, the statements that select what it removes (shared
with corpora.actions.history.history_prune, which hands them to corpora.pairs.history_remove) and the preview of
what it would remove."""

# ruff: noqa: S608  (statements are fixed text and status constants; values are parameters)
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, time
from typing import Any

from django.db import connection
from django.utils import dateparse, timezone

from config.errors import BadRequest
from corpora.models import Corpus
from corpora.pairs import history_tally
from corpora.queries.corpora import corpus_get, taskdiff_share
from corpora.tables import RUN_TABLE, SNAPSHOT_DIFF_TABLE, SNAPSHOT_MEMBERS_TABLE, SNAPSHOT_TABLE
from services.models import Service
from services.queries import service_get

CUTOFF_HELP = "a date YYYY-MM-DD (midnight, server time zone) or an ISO datetime such as 2024-05-01T12:00:00+00:00"


def prune_cutoff(text: str) -> datetime:
    """The cutoff of a prune from YYYY-MM-DD (its midnight) or an ISO datetime; one without an offset
    is in the server's time zone. BadRequest with the accepted forms for anything else."""
    text = text.strip()
    try:
        moment = dateparse.parse_datetime(text)
        if moment is None:
            day = dateparse.parse_date(text)
            moment = datetime.combine(day, time()) if day else None
    except ValueError:  # well formed but impossible, such as 2024-02-30
        moment = None
    if moment is None:
        raise BadRequest(f"{text!r} is not a date: use {CUTOFF_HELP}.", errors={"before": ["not a date"]})
    return timezone.make_aware(moment) if timezone.is_naive(moment) else moment


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
        f"SELECT s.id FROM {SNAPSHOT_TABLE} s WHERE s.taken_at < %s" + where + " AND s.taken_at <"
        f" (SELECT max(l.taken_at) FROM {SNAPSHOT_TABLE} l"
        " WHERE l.corpus_id = s.corpus_id AND l.service_id = s.service_id)"
    )
    return sql, [scope.before, *params]


def prune_runs_sql(scope: PruneScope) -> tuple[str, list[Any]]:
    """The WHERE of the runs a prune removes: finished before the cutoff (an open run has no end)."""
    where, params = scope.pair_where("r")
    return "r.finished_at < %s" + where, [scope.before, *params]


PRUNE_COUNTS = ("runs", "snapshots", "diffs", "diff_rows", "bytes")


@dataclass(frozen=True)
class PruneCounts:
    """What a prune removes (PruneCountsSerializer): runs, snapshots, diffs, their changed-document rows,
    and the bytes the removed rows occupy."""

    runs: int
    snapshots: int
    diffs: int
    diff_rows: int
    bytes: int


@dataclass(frozen=True)
class PrunePair(PruneCounts):
    """What a prune removes of one (corpus, service) pair (PrunePairSerializer)."""

    corpus: str
    service: str


@dataclass(frozen=True)
class PruneSummary:
    """A prune, previewed or done (PruneSummarySerializer): its cutoff and scope, per pair and in total."""

    before: datetime
    corpus: str | None
    service: str | None
    pairs: list[PrunePair]
    total: PruneCounts


def prune_summary(
    scope: PruneScope,
    pairs: dict[tuple[int, int], dict[str, int]],
    taskdiff: tuple[int, int],
) -> PruneSummary:
    """The summary of a prune (previewed or done): per pair and in total, the runs, snapshots, diffs
    and diff rows removed, and the bytes it frees: the snapshots' two arrays, their class members' arrays
    and the diffs' matrices as stored (pg_column_size), plus the diff rows' proportional share of corpora_taskdiff
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
        records.append(PrunePair(**record, corpus=corpora[corpus_id], service=services[service_id]))
    records.sort(key=lambda r: (r.corpus, r.service))
    return PruneSummary(
        before=scope.before,
        corpus=scope.corpus.name if scope.corpus else None,
        service=scope.service.name if scope.service else None,
        pairs=records,
        total=PruneCounts(**{key: sum(getattr(r, key) for r in records) for key in PRUNE_COUNTS}),
    )


def prune_preview(before: datetime, corpus: str | None = None, service: str | None = None) -> PruneSummary:
    """What history_prune would remove with the same arguments, per (corpus, service) pair: runs
    finished before `before`, snapshots taken before it but the latest of each pair, and every diff
    (with its rows) of a removed snapshot."""
    scope = prune_scope(before, corpus, service)
    snapshots, snapshot_params = prune_snapshots_sql(scope)
    runs, run_params = prune_runs_sql(scope)
    pairs: dict[tuple[int, int], dict[str, int]] = {}
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT r.corpus_id, r.service_id, count(*) FROM {RUN_TABLE} r WHERE {runs} GROUP BY 1, 2", run_params
        )
        history_tally(pairs, cursor.fetchall(), "runs")
        cursor.execute(
            f"WITH gone AS MATERIALIZED ({snapshots})"
            " SELECT s.corpus_id, s.service_id, count(*),"
            "  sum(pg_column_size(s.document_ids) + pg_column_size(s.statuses))"
            f" FROM {SNAPSHOT_TABLE} s WHERE s.id IN (SELECT id FROM gone) GROUP BY 1, 2",
            snapshot_params,
        )
        history_tally(pairs, cursor.fetchall(), "snapshots", "bytes")
        cursor.execute(
            f"WITH gone AS MATERIALIZED ({snapshots})"
            " SELECT s.corpus_id, s.service_id, sum(pg_column_size(m.document_ids))"
            f" FROM {SNAPSHOT_MEMBERS_TABLE} m JOIN {SNAPSHOT_TABLE} s ON s.id = m.snapshot_id"
            " WHERE m.snapshot_id IN (SELECT id FROM gone) GROUP BY 1, 2",
            snapshot_params,
        )
        history_tally(pairs, cursor.fetchall(), "bytes")
        cursor.execute(
            f"WITH gone AS MATERIALIZED ({snapshots})"
            " SELECT p.corpus_id, p.service_id, count(*), coalesce(sum(d.changed) FILTER (WHERE d.rows_ready), 0),"
            " sum(pg_column_size(d.matrix))"
            f" FROM {SNAPSHOT_DIFF_TABLE} d JOIN {SNAPSHOT_TABLE} p ON p.id = d.previous_id"
            " WHERE d.previous_id IN (SELECT id FROM gone) OR d.current_id IN (SELECT id FROM gone) GROUP BY 1, 2",
            snapshot_params,
        )
        history_tally(pairs, cursor.fetchall(), "diffs", "diff_rows", "bytes")
        share = taskdiff_share()
    return prune_summary(scope, pairs, share)
