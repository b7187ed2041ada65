"""The report rollup: grains summed from the message tallies, one (corpus, service, severity) slice at a
time, and the record that a slice is built (docs/decisions/reports.md). A report page builds a missing
slice (corpora.actions.reports.slice_ensure) or has a job build it; whoever changes a pair's tasks clears its
slices (the dispatcher's ingestion and reaping, a rerun, a refresh), and a purge of tasks deletes them."""

# ruff: noqa: S608  (statements are fixed text, table names and integers of our own; values are parameters)
from __future__ import annotations

import time
from typing import Any

from django.db import connection, transaction
from django.db.backends.utils import CursorWrapper

from corpora.choices import ClassLevel
from corpora.statuses import SEVERITIES
from corpora.tables import GRAIN_SLICE_TABLE, MESSAGE_CLASS_TABLE, MESSAGE_TALLY_TABLE, REPORT_GRAIN_TABLE


def grain_slice_rebuild(corpus_id: int, service_id: int, severity: str, *, timeout_ms: int | None = None) -> int:
    """Rebuild one (corpus, service, severity) slice; returns its rows.

    The slice is summed from the pair's tallies (kept exact by the message store,
    corpora.message_store) of the statuses it takes: a class's tallies give its what rows, the category and severity
    rollups their subtotal and total rows. Adding task counts over statuses is exact because a task has
    one status, so no task is counted twice. A few thousand rows, whatever the number of messages."""
    statuses, message_severity = SEVERITIES[severity]
    started = time.monotonic()
    with transaction.atomic(), connection.cursor() as cursor:
        if timeout_ms is not None:
            cursor.execute(f"SET LOCAL statement_timeout = {int(timeout_ms)}")
        # Rollup rows carry NULL category or what, as the grain rows of a category and of the slice.
        cursor.execute(
            f"SELECT CASE WHEN c.level < {ClassLevel.SEVERITY} THEN c.category END,"
            f" CASE WHEN c.level = {ClassLevel.CLASS} THEN c.what END, sum(t.tasks)::bigint, sum(t.messages)::bigint"
            f" FROM {MESSAGE_TALLY_TABLE} t JOIN {MESSAGE_CLASS_TABLE} c ON c.id = t.message_class_id"
            " WHERE t.corpus_id = %s AND t.service_id = %s AND t.task_status = ANY(%s) AND c.severity = %s"
            " AND t.tasks > 0 GROUP BY 1, 2",
            (corpus_id, service_id, list(statuses), message_severity),
        )
        grains = cursor.fetchall()
        if not any(category is None for category, *_ in grains):
            grains.append((None, None, 0, 0))  # the slice's total row, as a rollup of no messages has one
        key: list[int | str] = [corpus_id, service_id, severity]
        cursor.execute(
            f"DELETE FROM {REPORT_GRAIN_TABLE} WHERE corpus_id = %s AND service_id = %s AND severity = %s", key
        )
        cursor.execute(
            f"""
            INSERT INTO {REPORT_GRAIN_TABLE}
                   (corpus_id, service_id, severity, category, what, task_count, message_count)
            SELECT %s, %s, %s, g.category, g.what, g.tasks, g.messages
              FROM unnest(%s::text[], %s::text[], %s::bigint[], %s::bigint[]) AS g(category, what, tasks, messages)
            """,
            [*key, *([row[i] for row in grains] for i in range(4))],
        )
        rows: int = cursor.rowcount
        build_ms = int((time.monotonic() - started) * 1000)
        cursor.execute(
            f"INSERT INTO {GRAIN_SLICE_TABLE} (corpus_id, service_id, severity, built_at, build_ms)"
            " VALUES (%s, %s, %s, now(), %s) ON CONFLICT (corpus_id, service_id, severity)"
            " DO UPDATE SET built_at = now(), build_ms = EXCLUDED.build_ms",
            [*key, build_ms],
        )
    return rows


def grains_clear(pairs: set[tuple[int, int]] | list[tuple[int, int]]) -> int:
    """Forget the built report slices of these (corpus, service) pairs; pages rebuild them when next read.
    Returns how many slices were cleared."""
    pairs = list(pairs)
    if not pairs:
        return 0
    keys = [[c for c, _ in pairs], [s for _, s in pairs]]
    using = " USING unnest(%s::bigint[], %s::bigint[]) AS p(c, s) WHERE x.corpus_id = p.c AND x.service_id = p.s"
    with connection.cursor() as cursor:
        cursor.execute(f"DELETE FROM {GRAIN_SLICE_TABLE} x" + using, keys)
        cleared: int = cursor.rowcount
        cursor.execute(f"DELETE FROM {REPORT_GRAIN_TABLE} x" + using, keys)
    return cleared


def grains_purge(cursor: CursorWrapper, where: str, params: list[Any]) -> None:
    """Delete the grains and built slices whose corpus and service match `where` (fixed fragments on
    `corpus_id` and `service_id`; the ids are `params`), in the caller's transaction: a purge of tasks."""
    for table in (REPORT_GRAIN_TABLE, GRAIN_SLICE_TABLE):
        cursor.execute(f"DELETE FROM {table} WHERE {where}", params)
