"""Writes of the runs app: append a snapshot on request, compute diffs of snapshots, remove history.

Runs and snapshots are opened, closed and taken by their pair (corpora.pairs). History is append-only
over the API: a snapshot appended, a diff computed once; only the deletion of a corpus or service
(corpora.pairs.data_purge) and the human `prune_history` (history_prune, here) remove any of it.
"""

# ruff: noqa: S608  (statements are fixed text and status constants; values are parameters)
from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from django.db import connection, transaction

from accounts.actions import journal_note, journaled
from accounts.choices import Action
from config.api.paging import Page
from config.errors import NotFound
from config.planner import BULK_SETTINGS
from corpora.models import Activation
from corpora.pairs import snapshot_take
from corpora.queries import pair_get
from corpora.statuses import ABSENT_BUCKET
from runs.queries.diffs import DiffScope, run_diff, task_diffs
from runs.queries.prune import (
    PruneScope,
    prune_runs_sql,
    prune_scope,
    prune_snapshots_sql,
    prune_summary,
    prune_tally,
    taskdiff_share,
)

# Sorting and joining a million-row snapshot stays in memory; JIT compilation costs more than it saves.


@journaled(Action.RUNS_SNAPSHOT, target="{corpus_name}/{service_name}")
def snapshot_append(*, corpus_name: str, service_name: str, actor: str) -> dict[str, Any]:
    """POST .../snapshot: the current statuses of an activated pair as one new snapshot."""
    corpus, service = pair_get(corpus_name, service_name)
    if not Activation.objects.filter(corpus=corpus, service=service).exists():
        raise NotFound(f"The service {service_name!r} is not active on the corpus {corpus_name!r}.")
    taken = snapshot_take(corpus_id=corpus.pk, service_id=service.pk)
    return {"corpus": corpus.name, "service": service.name, "taken_at": taken.taken_at, "rows": taken.rows}


def _pairs_statement(same_documents: bool) -> str:
    """Each document of either snapshot with its status in both (ABSENT_BUCKET where it is missing);
    parameters: the previous and the current snapshot's ids."""
    if same_documents:
        # The usual case (no extend in between): the arrays paired position by position. Set-returning
        # functions in the select list run in step and stream their rows; unnest(a, b, c) in FROM first
        # copies every element of each array into a tuplestore, several times as slow
        # (docs/decisions.md, "Runs and snapshots").
        return (
            "SELECT unnest(p.document_ids) AS document_id, unnest(p.statuses) AS previous_status,"
            " unnest(c.statuses) AS current_status FROM runs_snapshot p, runs_snapshot c"
            " WHERE p.id = %s AND c.id = %s"
        )
    return (
        "SELECT coalesce(p.d, c.d) AS document_id,"
        f" coalesce(p.s, {ABSENT_BUCKET})::smallint AS previous_status,"
        f" coalesce(c.s, {ABSENT_BUCKET})::smallint AS current_status"
        " FROM (SELECT u.d, u.s FROM runs_snapshot, unnest(document_ids, statuses) AS u(d, s) WHERE id = %s) p"
        " FULL JOIN"
        " (SELECT u.d, u.s FROM runs_snapshot, unnest(document_ids, statuses) AS u(d, s) WHERE id = %s) c"
        " ON p.d = c.d"
    )


def _same_documents(cursor: Any, previous_id: int, current_id: int) -> bool:
    cursor.execute(
        "SELECT p.document_ids = c.document_ids FROM runs_snapshot p, runs_snapshot c WHERE p.id = %s AND c.id = %s",
        [previous_id, current_id],
    )
    return cursor.fetchone()[0]


def diff_ensure(*, previous_id: int, current_id: int) -> int:
    """The id of the diff of two snapshots, computing its matrix first if nobody has (one grouped pass
    over the two snapshots). A concurrent caller waits on the first one's row and reads its result.
    The changed documents' rows are written when a task list first needs them (diff_rows_ensure)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT id FROM runs_snapshotdiff WHERE previous_id = %s AND current_id = %s", [previous_id, current_id]
        )
        row = cursor.fetchone()
    if row:
        return row[0]
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO runs_snapshotdiff (previous_id, current_id, matrix, changed, rows_ready, created_at)"
            " VALUES (%s, %s, '[]', 0, false, now()) ON CONFLICT (previous_id, current_id) DO NOTHING RETURNING id",
            [previous_id, current_id],
        )
        row = cursor.fetchone()
        if row is None:  # computed meanwhile by another caller, whose commit the insert waited for
            cursor.execute(
                "SELECT id FROM runs_snapshotdiff WHERE previous_id = %s AND current_id = %s",
                [previous_id, current_id],
            )
            return cursor.fetchone()[0]
        diff_id = row[0]
        for statement in BULK_SETTINGS:
            cursor.execute(statement)
        pairs = _pairs_statement(_same_documents(cursor, previous_id, current_id))
        cursor.execute(
            f"SELECT previous_status, current_status, count(*) FROM ({pairs}) pairs"
            " GROUP BY 1, 2 ORDER BY 1 DESC, 2 DESC",
            [previous_id, current_id],
        )
        matrix = [list(row) for row in cursor.fetchall()]
        changed = sum(count for previous, current, count in matrix if previous != current)
        cursor.execute(
            "UPDATE runs_snapshotdiff SET matrix = %s::jsonb, changed = %s, rows_ready = %s WHERE id = %s",
            [json.dumps(matrix), changed, changed == 0, diff_id],
        )
    return diff_id


def diff_rows_ensure(diff_id: int) -> None:
    """Write the diff's changed documents (runs_taskdiff) if they are not there: once per diff, by the
    first task list that needs them; a concurrent caller waits on the diff's row lock. The table is
    unlogged (it is derived from snapshots that never change), so after a crash of the server it is
    empty: a diff marked ready whose rows are gone is written again."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT rows_ready AND (changed = 0 OR EXISTS (SELECT 1 FROM runs_taskdiff WHERE diff_id = %s))"
            " FROM runs_snapshotdiff WHERE id = %s",
            [diff_id, diff_id],
        )
        row = cursor.fetchone()
    if row is None or row[0]:
        return
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            "SELECT previous_id, current_id, rows_ready, changed FROM runs_snapshotdiff WHERE id = %s FOR UPDATE",
            [diff_id],
        )
        previous_id, current_id, ready, changed = cursor.fetchone()
        if ready:
            cursor.execute("SELECT EXISTS (SELECT 1 FROM runs_taskdiff WHERE diff_id = %s)", [diff_id])
            if changed == 0 or cursor.fetchone()[0]:
                return
        for statement in BULK_SETTINGS:
            cursor.execute(statement)
        pairs = _pairs_statement(_same_documents(cursor, previous_id, current_id))
        cursor.execute(
            "INSERT INTO runs_taskdiff (diff_id, previous_status, current_status, document_id)"
            f" SELECT %s, previous_status, current_status, document_id FROM ({pairs}) pairs"
            " WHERE previous_status <> current_status",
            [diff_id, previous_id, current_id],
        )
        cursor.execute("UPDATE runs_snapshotdiff SET rows_ready = true WHERE id = %s", [diff_id])


def diff_ready(previous_id: int | None, current_id: int | None, *, rows: bool = False) -> int | None:
    """The diff of a scope's two snapshots (runs.queries.diffs.diff_scope), made if needed, with its changed
    documents' rows too when `rows` (task lists); None without two snapshots."""
    if previous_id is None or current_id is None:
        return None
    diff_id = diff_ensure(previous_id=previous_id, current_id=current_id)
    if rows:
        diff_rows_ensure(diff_id)
    return diff_id


def diff_read(scope: DiffScope) -> tuple[int | None, dict[str, Any]]:
    """GET .../diff and the screens that show a diff: the diff of the scope's two snapshots, made if
    needed, and its record (runs.queries.diffs.run_diff). The id is what task_diff_count reads."""
    diff_id = diff_ready(scope.previous and scope.previous.id, scope.current and scope.current.id)
    return diff_id, run_diff(scope, diff_id)


def task_diffs_read(scope: DiffScope, page: Page, **filters: str | None) -> list[dict[str, Any]]:
    """GET .../tasks and the screens that list changed documents: a page of them
    (runs.queries.diffs.task_diffs), the diff and its changed documents' rows made first if needed."""
    diff_id = diff_ready(scope.previous and scope.previous.id, scope.current and scope.current.id, rows=True)
    return task_diffs(scope, diff_id, page, **filters)


@journaled(Action.RUNS_PRUNE, target=lambda a: f"{a.get('corpus') or '*'}/{a.get('service') or '*'}")
def history_prune(
    *, before: datetime, corpus: str | None = None, service: str | None = None, actor: str
) -> dict[str, Any]:
    """Remove the history runs.queries.prune.prune_preview shows for the same arguments, in one transaction:
    the diff rows and diffs of the removed snapshots, the finished runs, then the snapshots (a kept run
    that pointed at one loses its link). Returns what was removed, in the preview's shape; journaled."""
    scope = prune_scope(before, corpus, service)
    summary = _prune(scope)
    journal_note(removed=summary["total"], pairs=[f"{p['corpus']}/{p['service']}" for p in summary["pairs"]])
    return summary


def _prune(scope: PruneScope) -> dict[str, Any]:
    snapshots, snapshot_params = prune_snapshots_sql(scope)
    runs, run_params = prune_runs_sql(scope)
    pairs: dict[tuple[int, int], dict[str, int]] = {}
    with transaction.atomic(), connection.cursor() as cursor:
        # Locked first: a diff being computed on one of them waits for this prune, then finds it gone.
        cursor.execute(f"{snapshots} FOR UPDATE OF s", snapshot_params)
        snapshot_ids = [row[0] for row in cursor.fetchall()]
        cursor.execute(
            "SELECT id FROM runs_snapshotdiff WHERE previous_id = ANY(%s) OR current_id = ANY(%s)",
            [snapshot_ids, snapshot_ids],
        )
        diff_ids = [row[0] for row in cursor.fetchall()]
        share = taskdiff_share()  # before the delete, as the preview reads it
        cursor.execute(
            "WITH gone AS (DELETE FROM runs_taskdiff WHERE diff_id = ANY(%s) RETURNING diff_id)"
            " SELECT p.corpus_id, p.service_id, count(*) FROM gone"
            " JOIN runs_snapshotdiff d ON d.id = gone.diff_id JOIN runs_snapshot p ON p.id = d.previous_id"
            " GROUP BY 1, 2",
            [diff_ids],
        )
        prune_tally(pairs, cursor.fetchall(), "diff_rows")
        cursor.execute(
            "WITH gone AS (DELETE FROM runs_snapshotdiff WHERE id = ANY(%s)"
            "  RETURNING previous_id, pg_column_size(matrix) AS bytes)"
            " SELECT p.corpus_id, p.service_id, count(*), sum(gone.bytes) FROM gone"
            " JOIN runs_snapshot p ON p.id = gone.previous_id GROUP BY 1, 2",
            [diff_ids],
        )
        prune_tally(pairs, cursor.fetchall(), "diffs", "bytes")
        for table in ("runs_telemetrybin", "runs_telemetryminute"):  # the runs' telemetry (corpora.telemetry)
            gone = f"DELETE FROM {table} WHERE run_id IN (SELECT r.id FROM runs_run r WHERE {runs})"
            cursor.execute(gone, run_params)
        cursor.execute(
            f"WITH gone AS (DELETE FROM runs_run r WHERE {runs} RETURNING r.corpus_id, r.service_id)"
            " SELECT corpus_id, service_id, count(*) FROM gone GROUP BY 1, 2",
            run_params,
        )
        prune_tally(pairs, cursor.fetchall(), "runs")
        cursor.execute("UPDATE runs_run SET snapshot_id = NULL WHERE snapshot_id = ANY(%s)", [snapshot_ids])
        cursor.execute(
            "WITH gone AS (DELETE FROM runs_snapshotmembers WHERE snapshot_id = ANY(%s)"
            "  RETURNING snapshot_id, pg_column_size(document_ids) AS bytes)"
            " SELECT s.corpus_id, s.service_id, sum(gone.bytes) FROM gone"
            " JOIN runs_snapshot s ON s.id = gone.snapshot_id GROUP BY 1, 2",
            [snapshot_ids],
        )
        prune_tally(pairs, cursor.fetchall(), "bytes")
        cursor.execute("DELETE FROM runs_snapshotclass WHERE snapshot_id = ANY(%s)", [snapshot_ids])
        cursor.execute(
            "WITH gone AS (DELETE FROM runs_snapshot WHERE id = ANY(%s)"
            "  RETURNING corpus_id, service_id, pg_column_size(document_ids) + pg_column_size(statuses) AS bytes)"
            " SELECT corpus_id, service_id, count(*), sum(bytes) FROM gone GROUP BY 1, 2",
            [snapshot_ids],
        )
        prune_tally(pairs, cursor.fetchall(), "snapshots", "bytes")
    # The diffs' taskdiff share is added from the diff-row counts, as in the preview.
    return prune_summary(scope, pairs, share)
