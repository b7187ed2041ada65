"""The diffs of two snapshots of a pair, kept once computed (snapshots never change): the matrix of
status transitions when first asked for, and one row per document whose status changed when a task list
first needs them, so that every page of the task list is a few index ranges
(docs/decisions/snapshots.md). The runs app reads them (corpora.queries.diffs) and asks for them here
(corpora.actions.history)."""

# ruff: noqa: S608  (statements are fixed text, table names and status constants; values are parameters)
from __future__ import annotations

import json
from collections.abc import Iterable

from django.db import connection, transaction
from django.db.backends.utils import CursorWrapper

from config.planner import BULK_SETTINGS
from corpora.statuses import ABSENT_BUCKET
from corpora.tables import SNAPSHOT_DIFF_TABLE, SNAPSHOT_TABLE, TASK_DIFF_TABLE


def _pairs_statement(same_documents: bool) -> str:
    """Each document of either snapshot with its status in both (ABSENT_BUCKET where it is missing);
    parameters: the previous and the current snapshot's ids."""
    if same_documents:
        # The usual case (no extend in between): the arrays paired position by position. Set-returning
        # functions in the select list run in step and stream their rows; unnest(a, b, c) in FROM first
        # copies every element of each array into a tuplestore, several times as slow
        # (docs/decisions/snapshots.md).
        return (
            "SELECT unnest(p.document_ids) AS document_id, unnest(p.statuses) AS previous_status,"
            f" unnest(c.statuses) AS current_status FROM {SNAPSHOT_TABLE} p, {SNAPSHOT_TABLE} c"
            " WHERE p.id = %s AND c.id = %s"
        )
    return (
        "SELECT coalesce(p.d, c.d) AS document_id,"
        f" coalesce(p.s, {ABSENT_BUCKET})::smallint AS previous_status,"
        f" coalesce(c.s, {ABSENT_BUCKET})::smallint AS current_status"
        f" FROM (SELECT u.d, u.s FROM {SNAPSHOT_TABLE}, unnest(document_ids, statuses) AS u(d, s) WHERE id = %s) p"
        " FULL JOIN"
        f" (SELECT u.d, u.s FROM {SNAPSHOT_TABLE}, unnest(document_ids, statuses) AS u(d, s) WHERE id = %s) c"
        " ON p.d = c.d"
    )


def _same_documents(cursor: CursorWrapper, previous_id: int, current_id: int) -> bool:
    cursor.execute(
        f"SELECT p.document_ids = c.document_ids FROM {SNAPSHOT_TABLE} p, {SNAPSHOT_TABLE} c"
        " WHERE p.id = %s AND c.id = %s",
        [previous_id, current_id],
    )
    same: bool = cursor.fetchone()[0]
    return same


def diff_ensure(*, previous_id: int, current_id: int) -> int:
    """The id of the diff of two snapshots, computing its matrix first if nobody has (one grouped pass
    over the two snapshots), with the transitions of the documents that were an infrastructure failure in
    either snapshot apart (infrastructure_matrix), so that the matrix without them is a subtraction. A
    concurrent caller waits on the first one's row and reads its result. The changed documents' rows are
    written when a task list first needs them (diff_rows_ensure)."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT id FROM {SNAPSHOT_DIFF_TABLE} WHERE previous_id = %s AND current_id = %s",
            [previous_id, current_id],
        )
        row = cursor.fetchone()
    if row:
        existing: int = row[0]
        return existing
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {SNAPSHOT_DIFF_TABLE} (previous_id, current_id, matrix, changed, rows_ready, created_at)"
            " VALUES (%s, %s, '[]', 0, false, now()) ON CONFLICT (previous_id, current_id) DO NOTHING RETURNING id",
            [previous_id, current_id],
        )
        row = cursor.fetchone()
        if row is None:  # computed meanwhile by another caller, whose commit the insert waited for
            cursor.execute(
                f"SELECT id FROM {SNAPSHOT_DIFF_TABLE} WHERE previous_id = %s AND current_id = %s",
                [previous_id, current_id],
            )
            theirs: int = cursor.fetchone()[0]
            return theirs
        diff_id: int = row[0]
        for statement in BULK_SETTINGS:
            cursor.execute(statement)
        pairs = _pairs_statement(_same_documents(cursor, previous_id, current_id))
        infrastructure = _infrastructure_documents(cursor, previous_id, current_id)
        # The infrastructure failures' documents are told apart in the same pass, by a probe of their few ids.
        cursor.execute(
            f"SELECT previous_status, current_status, document_id = ANY(%s::bigint[]), count(*) FROM ({pairs}) pairs"
            " GROUP BY 1, 2, 3",
            [infrastructure, previous_id, current_id],
        )
        rows = cursor.fetchall()
        matrix = _matrix((p, c, n) for p, c, _, n in rows)
        infrastructure_matrix = _matrix((p, c, n) for p, c, flagged, n in rows if flagged)
        changed = sum(count for previous, current, count in matrix if previous != current)
        cursor.execute(
            f"UPDATE {SNAPSHOT_DIFF_TABLE} SET matrix = %s::jsonb, infrastructure_matrix = %s::jsonb, changed = %s,"
            " rows_ready = %s WHERE id = %s",
            [json.dumps(matrix), json.dumps(infrastructure_matrix), changed, changed == 0, diff_id],
        )
    return diff_id


def _infrastructure_documents(cursor: CursorWrapper, previous_id: int, current_id: int) -> list[int]:
    """The documents that were an infrastructure failure in either snapshot (few)."""
    cursor.execute(
        f"SELECT ARRAY(SELECT DISTINCT d FROM {SNAPSHOT_TABLE}, unnest(infrastructure_document_ids) AS d"
        " WHERE id IN (%s, %s) ORDER BY d)",
        [previous_id, current_id],
    )
    documents: list[int] = cursor.fetchone()[0]
    return documents


def _matrix(cells: Iterable[tuple[int, int, int]]) -> list[list[int]]:
    """[[previous, current, count], ...] with each transition once, the highest statuses first."""
    counts: dict[tuple[int, int], int] = {}
    for previous, current, count in cells:
        counts[previous, current] = counts.get((previous, current), 0) + count
    return [[p, c, n] for (p, c), n in sorted(counts.items(), reverse=True)]


def diff_rows_ensure(diff_id: int) -> None:
    """Write the diff's changed documents (corpora_taskdiff) if they are not there: once per diff, by the
    first task list that needs them; a concurrent caller waits on the diff's row lock. The table is
    unlogged (it is derived from snapshots that never change), so after a crash of the server it is
    empty: a diff marked ready whose rows are gone is written again."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT rows_ready AND (changed = 0 OR EXISTS (SELECT 1 FROM {TASK_DIFF_TABLE} WHERE diff_id = %s))"
            f" FROM {SNAPSHOT_DIFF_TABLE} WHERE id = %s",
            [diff_id, diff_id],
        )
        row = cursor.fetchone()
    if row is None or row[0]:
        return
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            f"SELECT previous_id, current_id, rows_ready, changed FROM {SNAPSHOT_DIFF_TABLE} WHERE id = %s FOR UPDATE",
            [diff_id],
        )
        previous_id, current_id, ready, changed = cursor.fetchone()
        if ready:
            cursor.execute(f"SELECT EXISTS (SELECT 1 FROM {TASK_DIFF_TABLE} WHERE diff_id = %s)", [diff_id])
            if changed == 0 or cursor.fetchone()[0]:
                return
        for statement in BULK_SETTINGS:
            cursor.execute(statement)
        pairs = _pairs_statement(_same_documents(cursor, previous_id, current_id))
        cursor.execute(
            f"INSERT INTO {TASK_DIFF_TABLE} (diff_id, previous_status, current_status, document_id)"
            f" SELECT %s, previous_status, current_status, document_id FROM ({pairs}) pairs"
            " WHERE previous_status <> current_status",
            [diff_id, previous_id, current_id],
        )
        cursor.execute(f"UPDATE {SNAPSHOT_DIFF_TABLE} SET rows_ready = true WHERE id = %s", [diff_id])
